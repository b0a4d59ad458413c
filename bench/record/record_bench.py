#!/usr/bin/env python3
"""ehelf record against perf record --call-graph dwarf on the same workloads.

For each workload and frequency: the workload's wall time unprofiled, under `ehelf record` and
under `perf record -e cpu-clock --call-graph dwarf,STACK` (same frequency and stack size); the
output's size (ehelf's flame graph and folded stacks against perf.data); the time from the
workload's end to a written flame graph (ehelf: until `ehelf record` exits; perf: until
`perf record` exits, plus `ehelf perf -f svg` and plus `perf script` on the recording); lost
samples; and whether the top-20 functions by total samples agree within sampling error with
perf's own unwinding of its recording (`perf script`). Writes JSON and a Markdown table.
"""
import argparse, json, math, os, re, shutil, statistics, subprocess, sys, tempfile, time


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def timed(cmd, end_file=None, **kw):
    """Wall time of cmd; with end_file, also the time from the workload's end (written there by the
    wrapper as CLOCK_REALTIME seconds) to cmd's exit."""
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kw)
    t1 = time.time()
    if p.returncode != 0:
        raise RuntimeError(f'{cmd}: exit {p.returncode}: {p.stderr[-2000:]}')
    after = None
    if end_file:
        after = t1 - float(open(end_file).read())
    return t1 - t0, after, p.stderr


def wrap(cmd, end_file):
    """The workload, then its end time written to end_file (inside the profiled command)."""
    return ['sh', '-c', '"$@"; st=$?; date +%s.%N > ' + end_file + '; exit $st', 'sh'] + cmd


def totals_from_folded(path):
    """Samples per function (each function once per stack) and all samples, from folded stacks."""
    per, all_ = {}, 0
    for line in open(path, errors='replace'):
        stack, _, n = line.rstrip('\n').rpartition(' ')
        n = int(n)
        all_ += n
        for name in set(stack.split(';')[1:]):
            per[name] = per.get(name, 0) + n
    return per, all_


def totals_from_perf_script(text):
    per, all_, frames = {}, 0, set()
    for line in text.split('\n') + ['']:
        if not line.strip():
            if frames:
                all_ += 1
                for f in frames:
                    per[f] = per.get(f, 0) + 1
            frames = set()
            continue
        if line[0] in ' \t':
            m = re.match(r'\s+[0-9a-f]+ (.*) \((.*)\)$', line)
            if m:
                name = m.group(1)
                name = re.sub(r'\+0x[0-9a-f]+$', '', name)
                if name == '[unknown]':
                    name = '[' + os.path.basename(m.group(2)) + ']'
                frames.add(name)
    return per, all_


def agreement(ours, ours_all, theirs, theirs_all, top=20):
    """The top functions by total in theirs (perf's), each compared with ours: within 3 standard
    errors of the difference of two proportions, plus half a percent for naming noise."""
    names = sorted(theirs, key=lambda k: -theirs[k])[:top]
    rows, agree = [], 0
    for n in names:
        p1 = ours.get(n, 0) / max(1, ours_all)
        p2 = theirs[n] / max(1, theirs_all)
        p = (ours.get(n, 0) + theirs[n]) / max(1, ours_all + theirs_all)
        se = math.sqrt(max(p * (1 - p), 1e-9) * (1 / max(1, ours_all) + 1 / max(1, theirs_all)))
        ok = abs(p1 - p2) <= 3 * se + 0.005
        agree += ok
        rows.append({'function': n, 'ehelf': round(100 * p1, 2), 'perf': round(100 * p2, 2), 'agree': ok})
    return agree, len(names), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ehelf', required=True)
    ap.add_argument('--fixtures', required=True)
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    ap.add_argument('--freqs', default='999,4000')
    ap.add_argument('--stack-size', type=int, default=16384)
    ap.add_argument('--quick', action='store_true', help='short workloads (CI smoke run)')
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix='ehelf-record-bench-')
    scale = 1 if a.quick else 5
    # Workloads: a C program (the 70/30 fixture), xz -9 on 24 MB of mixed data, python3 running a
    # loop-heavy script, a two-thread C program.
    data = os.path.join(work, 'input.bin')
    with open(data, 'wb') as f:
        rnd = subprocess.run(['head', '-c', str(4 << 20), '/dev/urandom'], stdout=subprocess.PIPE).stdout
        text = b''.join(open(p, 'rb').read()[:1 << 20] for p in ['/usr/bin/bash', '/usr/bin/perl'] if os.path.exists(p))
        f.write((rnd + text * 10)[: (24 << 20) // (5 // scale)])
    script = os.path.join(work, 'loop.py')
    open(script, 'w').write(
        'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n'
        'def work(k):\n    return sum(i * i % 7 for i in range(k))\n'
        f'for _ in range({2 * scale}):\n    fib(24); work(400000)\n')
    target = os.path.join(a.fixtures, 'record_target')
    workloads = [
        ('C program (70/30 split)', [target, 'split', str(300 * scale)]),
        ('xz -9', ['xz', '-9', '-k', '-c', '-T1', data]),
        ('python3 loop', ['python3', script]),
        ('2-thread C program', [target, 'threads', str(150 * scale)]),
    ]
    results = []
    for freq in [int(x) for x in a.freqs.split(',')]:
        for name, cmd in workloads:
            end = os.path.join(work, 'end')
            base = min(timed(wrap(cmd, end), end)[0] for _ in range(2))
            svg = os.path.join(work, 'ehelf.svg')
            folded = os.path.join(work, 'ehelf.folded')
            # (--unwind user: this is the stack-copying walk's benchmark; as root, auto would take
            # the in-kernel walk, bench/run_record_kernel.sh's)
            t_e, after_e, err = timed([a.ehelf, 'record', '--unwind', 'user', '-F', str(freq),
                                       '--stack-size', str(a.stack_size),
                                       '-o', svg, '--'] + wrap(cmd, end), end)
            lost_e = int((re.search(r'(\d+) samples lost', err) or [0, 0])[1])
            samples_e = int(re.search(r'(\d+) samples \(', err).group(1))
            timed([a.ehelf, 'record', '--unwind', 'user', '-q', '-F', str(freq),
                   '--stack-size', str(a.stack_size),
                   '-o', folded, '--'] + cmd)
            perf_data = os.path.join(work, 'perf.data')
            t_p, after_p, perr = timed(['perf', 'record', '-e', 'cpu-clock', '-F', str(freq),
                                        '--call-graph', f'dwarf,{a.stack_size}', '-o', perf_data, '--']
                                       + wrap(cmd, end), end)
            lost_p = sum(int(x) for x in re.findall(r'Processed \d+ events and lost (\d+) chunks', perr))
            t_svg = timed([a.ehelf, 'perf', '-f', 'svg', '-o', os.path.join(work, 'perf.svg'), perf_data])[0]
            t0 = time.time()
            script = subprocess.run(['perf', 'script', '--no-inline', '-i', perf_data, '-F', 'comm,tid,ip,sym,dso'],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    errors='replace').stdout
            t_script = time.time() - t0
            ours, ours_all = totals_from_folded(folded)
            theirs, theirs_all = totals_from_perf_script(script)
            agree, compared, rows = agreement(ours, ours_all, theirs, theirs_all)
            r = {
                'workload': name, 'freq': freq,
                'unprofiled_s': round(base, 3),
                'ehelf_s': round(t_e, 3), 'perf_s': round(t_p, 3),
                'ehelf_slowdown': round(t_e / base, 3), 'perf_slowdown': round(t_p / base, 3),
                'ehelf_samples': samples_e, 'ehelf_lost': lost_e, 'perf_lost_chunks': lost_p,
                'perf_samples': theirs_all,
                'ehelf_svg_bytes': os.path.getsize(svg), 'ehelf_folded_bytes': os.path.getsize(folded),
                'perf_data_bytes': os.path.getsize(perf_data),
                'size_ratio': round(os.path.getsize(perf_data) / max(1, os.path.getsize(svg)), 1),
                'ehelf_end_to_graph_s': round(after_e, 3),
                'perf_end_to_graph_s': round(after_p + t_svg, 3),
                'perf_end_to_script_s': round(after_p + t_script, 3),
                'graph_speedup': round((after_p + t_svg) / max(after_e, 1e-3), 1),
                'top20_agree': agree, 'top20_compared': compared, 'top20': rows,
            }
            results.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != 'top20'}), flush=True)
    meta = {'date': time.strftime('%Y-%m-%d'), 'kernel': os.uname().release,
            'cpus': os.cpu_count(), 'stack_size': a.stack_size, 'quick': a.quick}
    json.dump({'meta': meta, 'results': results}, open(a.json, 'w'), indent=1)
    with open(a.md, 'w') as md:
        md.write(f"ehelf record vs perf record --call-graph dwarf,{a.stack_size} (cpu-clock), "
                 f"{meta['date']}, kernel {meta['kernel']}, {meta['cpus']} CPUs\n\n")
        md.write('| workload | Hz | unprofiled s | slowdown ehelf | slowdown perf | samples ehelf / perf | lost ehelf / perf chunks '
                 '| output ehelf svg | perf.data | smaller | end to graph ehelf | perf + ehelf perf svg | perf + perf script | faster | top-20 agree |\n')
        md.write('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n')
        for r in results:
            md.write(f"| {r['workload']} | {r['freq']} | {r['unprofiled_s']} | {r['ehelf_slowdown']}x | {r['perf_slowdown']}x "
                     f"| {r['ehelf_samples']} / {r['perf_samples']} | {r['ehelf_lost']} / {r['perf_lost_chunks']} "
                     f"| {r['ehelf_svg_bytes'] / 1024:.0f} KiB | {r['perf_data_bytes'] / 1048576:.1f} MiB | {r['size_ratio']}x "
                     f"| {r['ehelf_end_to_graph_s']} s | {r['perf_end_to_graph_s']} s | {r['perf_end_to_script_s']} s "
                     f"| {r['graph_speedup']}x | {r['top20_agree']}/{r['top20_compared']} |\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
