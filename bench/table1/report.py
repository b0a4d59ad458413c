#!/usr/bin/env python3
"""Merges bench/table1's runs (one JSON per recording, with a .callgrind.jsonl beside it) into
bench/results/table1.json and table1.md: the paper's Table 1 on the same samples, and each peer's
frames compared with the ehelf fast walk's."""
import argparse
import datetime
import json
import os
import platform
import subprocess

REFERENCE = 'libunwind remote, cached'


def machine():
    cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo')
                if l.startswith('model name')), platform.processor())
    return f'{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs'


def reasons(d, limit=3):
    items = sorted(d.items(), key=lambda kv: -kv[1])
    text = ', '.join(f'{why} {n}' for why, n in items[:limit])
    if len(items) > limit:
        text += f', {len(items) - limit} more kinds'
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--command', required=True)
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    # Without runs: the tables written again from --json as an earlier merge left it.
    ap.add_argument('runs', nargs='*')
    a = ap.parse_args()
    if not a.runs:
        result = json.load(open(a.json))
        write_md(result, a.md)
        return
    try:
        commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ''
    result = {'date': datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC'),
              'commit': commit, 'machine': machine(), 'command': a.command,
              'load_average': os.getloadavg(), 'workloads': []}
    for path in a.runs:
        run = json.load(open(path))
        cg = {}
        cg_path = path[:-len('.json')] + '.callgrind.jsonl'
        if os.path.exists(cg_path):
            for line in open(cg_path):
                d = json.loads(line)
                cg[d['peer']] = d
        for p in run['peers']:
            c = cg.get(p['peer'])
            if c and c['frames']:
                p['callgrind'] = c
                p['instructions_per_frame'] = c['instructions'] / c['frames']
        result['workloads'].append(run)
    json.dump(result, open(a.json, 'w'), indent=2)
    write_md(result, a.md)


def write_md(result, md_path):
    out = []
    w = out.append
    w('# The paper\'s Table 1 on the same samples (`bench/run_table1.sh`)\n')
    w(f'- Date: {result["date"]} (repository at {result["commit"]})')
    w(f'- Machine: {result["machine"]}; load average {", ".join(f"{x:.1f}" for x in result["load_average"])} '
      'at the end (the machine is shared: times are noisy, instruction counts are not)')
    w(f'- Rerun: `{result["command"]}` (writes this file and `bench/results/table1.json`)\n')
    w('Each recording is `perf record -e cpu-clock -F 4000 --call-graph dwarf` (8 KiB stack '
      'copies) of the workload; every peer walks every user sample from the same registers and '
      'stack bytes (bench/table1). *time* is one pass over all samples after a first one that '
      'loaded what each peer loads lazily (the best of the rounds; the JSON has the median too); *setup* is the untimed '
      'preparation per process (module tables, address spaces, Dwfl sessions). '
      '*instr/frame* is callgrind\'s count over every k-th sample of the recording (k and the '
      'count under each table; collection toggled around one pass, after an uncollected one). '
      '*x fewer instr* and '
      f'*x faster* are {REFERENCE}\'s instructions and time per frame divided by the peer\'s. '
      '*ended early*: walks that stopped before the outermost frame, with the most common '
      'reasons in the peer\'s own words.\n')
    w('## Summary\n')
    w('Instructions per frame (callgrind) and, in parentheses, ns per frame; *x fewer* is '
      f'{REFERENCE}\'s instructions per frame over the ehelf fast walk\'s; *same frames*: samples '
      'whose frames the fast walk and libunwind agree on exactly.\n')
    names = ['ehelf fast walk', 'ehelf general, compiled', 'ehelf general, table',
             REFERENCE, 'libunwind remote, UNW_CACHE_NONE', 'elfutils libdwfl']
    w('| workload | samples | frames | ' + ' | '.join(names) + ' | x fewer | same frames |')
    w('|---|---:|---:|' + '---:|' * len(names) + '---:|---:|')
    for run in result['workloads']:
        by = {p['peer']: p for p in run['peers']}
        cells = []
        for n in names:
            p = by.get(n)
            ipf = p.get('instructions_per_frame') if p else None
            cells.append(f'{ipf:,.0f} ({p["ns_per_frame"]:,.0f})' if ipf else '-')
        fast, ref = by.get('ehelf fast walk'), by.get(REFERENCE)
        ratio = (ref['instructions_per_frame'] / fast['instructions_per_frame']
                 if fast and ref and fast.get('instructions_per_frame') and
                 ref.get('instructions_per_frame') else None)
        same = ref['vs_fast_walk']['same'] if ref else 0
        w(f'| {run["workload"]} | {run["samples"]:,} | {fast["frames"] if fast else 0:,} | ' +
          ' | '.join(cells) + f' | {f"{ratio:.0f}x" if ratio else "-"} | '
          f'{100.0 * same / max(run["samples"], 1):.2f} % |')
    # Every recording together: each peer's instructions and time per frame weighted by the
    # recordings' frames (what walking all their samples would cost per frame); None when a
    # recording has no callgrind count for the peer.
    def weighted(name):
        rows = [next((q for q in run['peers'] if q['peer'] == name), None)
                for run in result['workloads']]
        if not all(r and r.get('instructions_per_frame') for r in rows):
            return None
        frames = sum(r['frames'] for r in rows)
        if not frames:
            return None
        return (sum(r['instructions_per_frame'] * r['frames'] for r in rows) / frames,
                sum(r['ns_per_frame'] * r['frames'] for r in rows) / frames)
    total = {n: t for n in names if (t := weighted(n))}
    if len(result['workloads']) > 1 and 'ehelf fast walk' in total and REFERENCE in total:
        samples = sum(run['samples'] for run in result['workloads'])
        frames = sum(next(q['frames'] for q in run['peers'] if q['peer'] == 'ehelf fast walk')
                     for run in result['workloads'])
        same = sum(next((q['vs_fast_walk']['same'] for q in run['peers'] if q['peer'] == REFERENCE), 0)
                   for run in result['workloads'])
        cells = [f'{total[n][0]:,.0f} ({total[n][1]:,.0f})' if n in total else '-' for n in names]
        w(f'| all, frames-weighted | {samples:,} | {frames:,} | ' + ' | '.join(cells) +
          f' | {total[REFERENCE][0] / total["ehelf fast walk"][0]:.0f}x | '
          f'{100.0 * same / max(samples, 1):.2f} % |')
    w('')
    for run in result['workloads']:
        peers = run['peers']
        ref = next((p for p in peers if p['peer'] == REFERENCE), None)
        w(f'## {run["workload"]}\n')
        text = (f'{run["samples"]:,} user samples with a stack copy (of '
                f'{run["samples_recorded"]:,} recorded).')
        if run['mappings_without_file']:
            text += (' Mappings without a usable file (no peer unwinds through them): ' +
                     ', '.join(f'{k} ({v})' for k, v in run['mappings_without_file'].items()) + '.')
        cg = [p['callgrind'] for p in peers if p.get('callgrind')]
        if cg:
            text += (f' Callgrind: every {cg[0].get("stride", 1)}th sample, {cg[0]["samples"]:,} '
                     'samples.')
        w(text)
        w('')
        w('| peer | frames | setup | time | ns/frame | instr/frame | x fewer instr | x faster | ended early (why) |')
        w('|---|---:|---:|---:|---:|---:|---:|---:|---|')
        for p in peers:
            ipf = p.get('instructions_per_frame')
            rin = (ref.get('instructions_per_frame') / ipf) if ref and ipf and ref.get('instructions_per_frame') else None
            rt = (ref['ns_per_frame'] / p['ns_per_frame']) if ref and p['ns_per_frame'] else None
            w(f'| {p["peer"]} | {p["frames"]:,} | {p["setup_s"]:.2f} s | {p["steady_s"] * 1000:.1f} ms | '
              f'{p["ns_per_frame"]:.1f} | {f"{ipf:,.0f}" if ipf else "-"} | '
              f'{f"{rin:.1f}" if rin else "-"} | {f"{rt:.1f}" if rt else "-"} | '
              f'{p["ended_early"]:,}{(": " + reasons(p["ended_early_why"])) if p["ended_early"] else ""} |')
        notes = [f'{p["peer"]}: {p["note"]}' for p in peers if p.get('note')]
        if notes:
            w('\nNotes: ' + '; '.join(notes) + '.')
        w('\nFrames of each sample against the ehelf fast walk\'s: *same*; *shorter*/*longer*: one '
          'walk is a prefix of the other (the shorter one\'s reason); *differ*: a different pc at '
          'some frame.\n')
        w('| peer | same | shorter (peer\'s reason) | longer (fast walk\'s reason) | differ (kinds) |')
        w('|---|---:|---|---|---|')
        for p in peers[1:]:
            v = p['vs_fast_walk']
            sh = sum(v['peer_shorter'].values())
            lo = sum(v['peer_longer'].values())
            w(f'| {p["peer"]} | {v["same"]:,} | {sh:,}{(": " + reasons(v["peer_shorter"])) if sh else ""} | '
              f'{lo:,}{(": " + reasons(v["peer_longer"])) if lo else ""} | '
              f'{v["differ"]:,}{(": " + reasons(v["differ_kinds"])) if v["differ"] else ""} |')
        w('')
    open(md_path, 'w').write('\n'.join(out) + '\n')


if __name__ == '__main__':
    main()
