#!/usr/bin/env python3
"""Times perf script and ehelf perf on the same `perf record --call-graph dwarf` recording.

Each command runs --runs times (after one untimed warm-up run that also fills the page cache);
the median wall time is reported, per sample and per frame. `perf script -F comm,tid,time` (no
call chains, so no unwinding) is timed too: the difference to the full `perf script` is what its
unwinding and symbolization cost. Frames are checked to be identical (address and file) between
perf script and each ehelf configuration before anything is reported.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, env=None, out=subprocess.DEVNULL):
    subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.DEVNULL, env=env)


def timed(cmd, runs, env=None):
    run(cmd, env)  # warm-up: page cache, eh_elf loading from disk
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        run(cmd, env)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def frames_of(path):
    samples = []
    for line in open(path):
        if not line.startswith('\t'):
            if line.strip():
                samples.append([])
            continue
        m = re.match(r'\t\s*([0-9a-f]+) .* \(([^()]*)\)$', line.rstrip('\n'))
        samples[-1].append((m.group(1), m.group(2)))
    return samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ehelf', required=True)
    ap.add_argument('--target', required=True)
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    ap.add_argument('--runs', type=int, default=int(os.environ.get('PERF_BENCH_RUNS', '5')))
    ap.add_argument('--seconds', type=int, default=int(os.environ.get('PERF_BENCH_SECONDS', '5')))
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    data = os.path.join(work, 'perf.data')
    run(['perf', 'record', '-q', '-e', 'cpu-clock', '-F', '1000', '--call-graph', 'dwarf',
         '-o', data, a.target, str(a.seconds)])
    env = dict(os.environ, EHELF_CACHE=os.path.join(work, 'cache'))
    os.makedirs(env['EHELF_CACHE'])
    libc = next(l.split()[2] for l in subprocess.run(['ldd', a.target], capture_output=True,
                text=True).stdout.splitlines() if 'libc.so.6' in l)
    run([a.ehelf, 'compile', '--cache', '-j2', a.target, libc], env)

    perf_fields = ['-F', 'comm,pid,tid,time,ip,sym,dso', '--no-inline']
    reference = os.path.join(work, 'perf.txt')
    with open(reference, 'w') as out:
        run(['perf', 'script', '-i', data] + perf_fields, out=out)
    ref = frames_of(reference)
    samples = len(ref)
    frames = sum(len(s) for s in ref)

    rows = []
    def measure(name, cmd, check_output=False):
        if check_output:
            path = os.path.join(work, 'out.txt')
            with open(path, 'w') as out:
                run(cmd, env, out=out)
            got = frames_of(path)
            same = sum(1 for x, y in zip(got, ref) if x == y)
            if len(got) != samples or same != samples:
                sys.exit(f'{name}: {same}/{samples} samples identical to perf script')
        median, best = timed(cmd, a.runs, env)
        rows.append({'command': name, 'median_s': median, 'best_s': best,
                     'us_per_sample': 1e6 * median / samples, 'ns_per_frame': 1e9 * median / frames})

    measure('perf script (no call chains: no unwinding)',
            ['perf', 'script', '-i', data, '-F', 'comm,tid,time'])
    measure('perf script (call chains: its DWARF unwinder)',
            ['perf', 'script', '-i', data] + perf_fields)
    for backend in ['auto', 'table', 'compiled', 'interp']:
        measure(f'ehelf perf --backend {backend} (script layout)',
                [a.ehelf, 'perf', data, '--backend', backend], check_output=True)
    measure('ehelf perf -f folded', [a.ehelf, 'perf', data, '-f', 'folded'])
    measure('ehelf perf -f folded -n 1 (no walk: first user frame only)',
            [a.ehelf, 'perf', data, '-f', 'folded', '-n', '1'])

    base = rows[0]['median_s']
    perf_full = rows[1]['median_s']
    now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True,
                            text=True).stdout.strip()
    cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if 'model name' in l), '?')
    result = {'date': now, 'machine': f'{cpu}, {os.cpu_count()} cores', 'kernel': platform.release(),
              'commit': commit, 'samples': samples, 'frames': frames,
              'recording_bytes': os.path.getsize(data), 'runs': a.runs, 'rows': rows}
    with open(a.json, 'w') as f:
        json.dump(result, f, indent=2)
    md = [f'# perf.data to stacks: ehelf perf against perf script', '',
          f'Date: {now}. Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}. '
          f'Command: `bench/run_perf.sh`. ehelf {commit}.', '',
          f'Recording: `perf record -e cpu-clock -F 1000 --call-graph dwarf` of '
          f'tests/fixtures/perf_target running {a.seconds} s ({samples} samples, {frames} frames, '
          f'{os.path.getsize(data) / 1e6:.1f} MB). Every ehelf configuration printed the same '
          f'frames (address and file) as perf script for every sample. Wall time, median of '
          f'{a.runs} runs after a warm-up run.', '',
          '| command | median ms | us per sample | ns per frame | vs perf script |',
          '|---|---:|---:|---:|---:|']
    for r in rows:
        md.append(f"| {r['command']} | {1e3 * r['median_s']:.1f} | {r['us_per_sample']:.1f} | "
                  f"{r['ns_per_frame']:.0f} | {r['median_s'] / perf_full:.3f}x |")
    walk = rows[-2]['median_s'] - rows[-1]['median_s']
    md += ['', f"perf script's unwinding and symbolization: {1e3 * (perf_full - base):.0f} ms "
           f"({1e9 * (perf_full - base) / frames:.0f} ns per frame) over its run without call "
           f"chains. ehelf's walks, symbols and folding of the frames after the first: "
           f"{1e3 * walk:.0f} ms ({1e9 * walk / frames:.0f} ns per frame) over its run that "
           'stops at the first frame; the rest of both is reading the file, /proc/kallsyms '
           'and the module files.']
    with open(a.md, 'w') as f:
        f.write('\n'.join(md) + '\n')


if __name__ == '__main__':
    main()
