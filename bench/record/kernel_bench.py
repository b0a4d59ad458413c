#!/usr/bin/env python3
"""ehelf record's two modes side by side with perf record, in one run (in-kernel unwinding).

For each workload and frequency: the workload's wall time unprofiled, under
`ehelf record --unwind kernel`, `ehelf record --unwind user`, `perf record -g` (frame pointers:
the floor of any sampler) and `perf record --call-graph dwarf`; the bytes the kernel handed to
user space per sample (ehelf's summary in both modes; perf: perf.data's size over its samples);
the profiler's own CPU time (its user + system time less the workload's, from wait4's rusage of
the profiler and of the workload alone); the BPF program's run time per sample and per frame
(kernel.bpf_stats_enabled, set for the run and restored); lost samples; the samples that waited
in the kernel for their tables (parked) and the replay's time per parked sample (a workload that
dlopens a library of 420,000 rows and runs in it at once parks most of its samples).

Then the walk's cost against its peer in the kernel: the C fixture built with frame pointers,
sampled by ehelf's program (the rows) and by bench_fp_walk's (the kernel's own frame-pointer walk
of the user stack, bpf_get_stackid: bpftrace's ustack, bcc's profile), alternated, each program's
run time per sample by the kernel's BPF statistics. Writes JSON and Markdown.
"""
import argparse, json, os, re, resource, statistics, subprocess, sys, tempfile, time


def cpu_of(cmd, **kw):
    """(wall seconds, children's user+system seconds, stderr) of cmd."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kw)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f'{cmd}: exit {p.returncode}: {p.stderr[-2000:]}')
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stderr


def ehelf_numbers(stderr):
    out = {}
    m = re.search(r'(\d+) from the perf rings, (\d+) from the maps \(([\d.]+) per sample\)', stderr)
    if m:
        out['bytes_per_sample'] = float(m.group(3))
    m = re.search(r'walked in user space: .* \(([\d.]+) per sample\)', stderr)
    if m:
        out['bytes_per_sample'] = float(m.group(1))
    m = re.search(r'BPF program: (\d+) runs, (\d+) ns each \(([\d.]+) ns per frame\)', stderr)
    if m:
        out['bpf_ns_per_sample'] = int(m.group(2))
        out['bpf_ns_per_frame'] = float(m.group(3))
    m = re.search(r'waited in the kernel for their tables: (\d+)', stderr)
    out['parked'] = int(m.group(1)) if m else 0
    m = re.search(r"parked samples' replay: (\d+) runs, ([\d.]+) ms in all", stderr)
    if m and out['parked']:
        out['replay_us_per_parked'] = float(m.group(2)) * 1000 / out['parked']
    m = re.search(r'walked in the kernel: (\d+) samples, ([\d.]+) frames each', stderr)
    if m:
        out['samples'] = int(m.group(1))
        out['frames_per_sample'] = float(m.group(2))
    m = re.search(r'^([\d,]+) samples', stderr, re.M)
    if m and 'samples' not in out:
        out['samples'] = int(m.group(1).replace(',', ''))
    m = re.search(r'([\d,]+) lost', stderr)
    out['lost'] = int(m.group(1).replace(',', '')) if m else 0
    return out


def perf_numbers(data, stderr):
    out = {}
    size = os.path.getsize(data)
    m = re.search(r'\(([\d]+) samples\)', stderr)
    if m:
        out['samples'] = int(m.group(1))
        out['bytes_per_sample'] = size / max(1, out['samples'])
    m = re.search(r'Lost (\d+)', stderr) or re.search(r'(\d+) lost', stderr)
    out['lost'] = int(m.group(1)) if m else 0
    return out


def large_library(work):
    """A program that dlopens a library of 420,000 rows (60,000 functions of assembly with their
    CFI, and a C spin) and runs in it at once: its table is built while its first samples wait."""
    asm = ['\t.section .note.GNU-stack,"",@progbits', '\t.text']
    for i in range(60000):
        asm.append(f'\t.p2align 4\nbig_f{i}:\n\t.cfi_startproc\n\tpush %rbp\n'
                   '\t.cfi_adjust_cfa_offset 8\n\t.cfi_offset %rbp, -16\n\tpush %rbx\n'
                   '\t.cfi_adjust_cfa_offset 8\n\tpush %r12\n\t.cfi_adjust_cfa_offset 8\n'
                   '\tpop %r12\n\t.cfi_adjust_cfa_offset -8\n\tpop %rbx\n'
                   '\t.cfi_adjust_cfa_offset -8\n\tpop %rbp\n\t.cfi_adjust_cfa_offset -8\n'
                   '\tret\n\t.cfi_endproc')
    open(os.path.join(work, 'big.s'), 'w').write('\n'.join(asm) + '\n')
    open(os.path.join(work, 'spin.c'), 'w').write(
        '#include <stdint.h>\n'
        '__attribute__((noinline)) uint64_t big_inner(uint64_t x) {\n'
        '  for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005u + 1442695040888963407u;\n'
        '  __asm__ volatile("" : "+r"(x));\n  return x;\n}\n'
        '__attribute__((noinline)) uint64_t big_spin(uint64_t n) {\n'
        '  uint64_t x = 1;\n  for (uint64_t i = 0; i < n; ++i) x = big_inner(x);\n  return x;\n}\n')
    open(os.path.join(work, 'main.c'), 'w').write(
        '#include <dlfcn.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n'
        'int main(int argc, char **argv) {\n  (void)argc;\n'
        '  void *lib = dlopen(argv[1], RTLD_NOW);\n'
        '  if (!lib) { fprintf(stderr, "%s\\n", dlerror()); return 1; }\n'
        '  uint64_t (*spin)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(lib, "big_spin");\n'
        '  printf("%llu\\n", (unsigned long long)spin(strtoull(argv[2], 0, 10)));\n  return 0;\n}\n')
    lib, exe = os.path.join(work, 'libbig.so'), os.path.join(work, 'big_main')
    subprocess.run(['gcc', '-O1', '-shared', '-fPIC', '-o', lib, os.path.join(work, 'big.s'),
                    os.path.join(work, 'spin.c')], check=True)
    subprocess.run(['gcc', '-O1', '-o', exe, os.path.join(work, 'main.c'), '-ldl'], check=True)
    return exe, lib


def frame_pointer_fixture(fixtures_source, work):
    """The record fixture built as its first line says, but with frame pointers (the kernel's
    walk of the peer follows them; ehelf's walk uses the tables either way)."""
    src = os.path.join(fixtures_source, 'record_target.c')
    first = open(src).readline()
    flags = first.split('flags:', 1)[1].split()
    flags = ['-fno-omit-frame-pointer' if f == '-fomit-frame-pointer' else f for f in flags]
    exe = os.path.join(work, 'record_target_fp')
    subprocess.run(['gcc'] + flags + ['-o', exe, src], check=True)
    return exe


def fp_walk_numbers(stdout):
    m = re.search(r'fp walk: (\d+) runs, (\d+) ns each, ([\d.]+) frames each', stdout)
    if not m:
        raise RuntimeError(f'bench_fp_walk: no result in {stdout[-500:]!r}')
    if int(m.group(1)) == 0:
        raise RuntimeError('bench_fp_walk: the program never ran (no sample of the command)')
    return {'runs': int(m.group(1)), 'bpf_ns_per_sample': int(m.group(2)),
            'frames_per_sample': float(m.group(3))}


def against_fp_walk(a, work, freqs):
    """ehelf's program and the kernel's frame-pointer walk on the fixture built with frame
    pointers, alternated a.repeat times per mode and frequency: medians of each."""
    exe = frame_pointer_fixture(a.fixtures_source, work)
    units = '150' if a.quick else '400'
    rows = []
    out = os.path.join(work, 'fp.folded')
    for freq in freqs:
        for mode in ('deep', 'split', 'threads'):
            cmd = [exe, mode, units]
            ours, peer = [], []
            for _ in range(a.repeat):
                r = cpu_of([a.ehelf, 'record', '--unwind', 'kernel', '-F', str(freq), '-o', out,
                            '--'] + cmd)
                ours.append(ehelf_numbers(r[2]))
                p = subprocess.run([a.fp_walk, '-F', str(freq), '--'] + cmd, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                if p.returncode != 0:
                    raise RuntimeError(f'bench_fp_walk: exit {p.returncode}: {p.stderr[-2000:]}')
                peer.append(fp_walk_numbers(p.stdout))
            med = lambda runs, key: statistics.median(r[key] for r in runs)
            row = {'workload': f'C fixture ({mode}), frame pointers', 'freq': freq,
                   'ehelf_ns_per_sample': med(ours, 'bpf_ns_per_sample'),
                   'ehelf_frames': med(ours, 'frames_per_sample'),
                   'ehelf_runs': [r['bpf_ns_per_sample'] for r in ours],
                   'fp_walk_ns_per_sample': med(peer, 'bpf_ns_per_sample'),
                   'fp_walk_frames': med(peer, 'frames_per_sample'),
                   'fp_walk_runs': [r['bpf_ns_per_sample'] for r in peer]}
            row['ratio'] = row['ehelf_ns_per_sample'] / row['fp_walk_ns_per_sample']
            if mode == 'deep' and row['fp_walk_frames'] < 26:
                # (26 frames of `descend`: fewer, and the fixture was not built with frame
                # pointers, or the kernel's walk stopped: the two would not walk the same stacks)
                raise RuntimeError(f"the kernel's frame-pointer walk took {row['fp_walk_frames']} "
                                   'frames of the deep fixture, not its 26 or more')
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    return rows


def median_run(fn, repeat):
    runs = [fn() for _ in range(repeat)]
    runs.sort(key=lambda r: r[0])
    return runs[len(runs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ehelf', required=True)
    ap.add_argument('--fixtures', required=True)
    ap.add_argument('--fixtures-source', required=True)
    ap.add_argument('--fp-walk', required=True)
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--freqs', default='999,4000')
    ap.add_argument('--repeat', type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    data = os.path.join(work, 'input.txt')
    with open(data, 'wb') as f:
        f.write(os.urandom(3 << 20 if a.quick else 12 << 20).hex().encode())
    units = '150' if a.quick else '800'
    workloads = {
        'C fixture (split)': [os.path.join(a.fixtures, 'record_target'), 'split', units],
        'C threads': [os.path.join(a.fixtures, 'record_target'), 'threads', units],
        'C, 31 frames deep': [os.path.join(a.fixtures, 'record_target'), 'deep', units],
        'xz -9': ['xz', '-9', '-k', '-T1', '-c', data],
        'python3': ['python3', '-c', 'import json; d=[{"k": i, "v": str(i)*5} for i in range(%d)]; '
                    'json.loads(json.dumps(d)); sorted(d, key=lambda x: x["v"])'
                    % (200000 if a.quick else 1500000)],
    }
    exe, lib = large_library(work)
    workloads['dlopen, 420k rows'] = [exe, lib, '200000' if a.quick else '1000000']
    stats_path = '/proc/sys/kernel/bpf_stats_enabled'
    old_stats = open(stats_path).read().strip() if os.path.exists(stats_path) else None
    if old_stats is not None:
        open(stats_path, 'w').write('1')
    results = []
    try:
        for freq in [int(f) for f in a.freqs.split(',')]:
            for name, cmd in workloads.items():
                row = {'workload': name, 'freq': freq}
                base = median_run(lambda: cpu_of(cmd), a.repeat)
                row['alone_s'] = base[0]
                out = os.path.join(work, 'p.folded')
                for mode in ('kernel', 'user'):
                    r = median_run(lambda: cpu_of([a.ehelf, 'record', '--unwind', mode, '-F',
                                                   str(freq), '-o', out, '--'] + cmd), a.repeat)
                    row[mode] = dict(ehelf_numbers(r[2]), wall_s=r[0],
                                     slowdown=r[0] / base[0], profiler_cpu_s=max(0, r[1] - base[1]))
                pd = os.path.join(work, 'perf.data')
                for mode, flags in (('perf -g', ['-g']),
                                    ('perf dwarf', ['--call-graph', 'dwarf,16384'])):
                    r = median_run(lambda: cpu_of(['perf', 'record', '-e', 'cpu-clock', '-F',
                                                   str(freq), '-o', pd] + flags + ['--'] + cmd),
                                   a.repeat)
                    row[mode] = dict(perf_numbers(pd, r[2]), wall_s=r[0],
                                     slowdown=r[0] / base[0], profiler_cpu_s=max(0, r[1] - base[1]))
                results.append(row)
                print(json.dumps(row), file=sys.stderr)
        peers = against_fp_walk(a, work, [int(f) for f in a.freqs.split(',')])
    finally:
        if old_stats is not None:
            open(stats_path, 'w').write(old_stats)
    meta = {'date': time.strftime('%Y-%m-%d'), 'machine': os.uname().nodename + ' ' +
            os.uname().release + f', {os.cpu_count()} CPUs',
            'command': 'bash bench/run_record_kernel.sh' + (' --quick' if a.quick else ''),
            'repeat': a.repeat}
    json.dump({'meta': meta, 'results': results, 'against_fp_walk': peers}, open(a.json, 'w'),
              indent=1)
    lines = [f"# ehelf record: in-kernel walk against user-space walk and perf ({meta['date']})", '',
             f"Machine: {meta['machine']}. Rerun: `{meta['command']}`. Median of {a.repeat} runs.",
             '', 'Slowdown: wall time under the profiler over the workload alone. Bytes/sample: '
             'what the kernel hands to user space per sample (ehelf: perf rings and BPF maps; '
             'perf: perf.data size over its samples). Profiler CPU: the profiler\'s own user+system '
             'seconds. BPF: the program\'s run time per sample and per frame '
             '(kernel.bpf_stats_enabled).', '',
             '| workload | Hz | kernel slowdown | user slowdown | perf -g | perf dwarf | '
             'bytes/sample kernel | user | perf dwarf | profiler CPU kernel / user (s) | '
             'BPF ns/sample | ns/frame | frames | lost kernel / user / perf dwarf | '
             'parked | replay us/parked |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for r in results:
        k, u, g, d = r['kernel'], r['user'], r['perf -g'], r['perf dwarf']
        lines.append(
            f"| {r['workload']} | {r['freq']} | {k['slowdown']:.3f} | {u['slowdown']:.3f} | "
            f"{g['slowdown']:.3f} | {d['slowdown']:.3f} | {k.get('bytes_per_sample', 0):.1f} | "
            f"{u.get('bytes_per_sample', 0):.0f} | {d.get('bytes_per_sample', 0):.0f} | "
            f"{k['profiler_cpu_s']:.2f} / {u['profiler_cpu_s']:.2f} | "
            f"{k.get('bpf_ns_per_sample', '-')} | {k.get('bpf_ns_per_frame', '-')} | "
            f"{k.get('frames_per_sample', '-')} | {k['lost']} / {u['lost']} / {d['lost']} | "
            f"{k.get('parked', 0)} | "
            f"{'%.1f' % k['replay_us_per_parked'] if 'replay_us_per_parked' in k else '-'} |")
    lines += ['', '## The walk against the kernel\'s frame-pointer walk', '',
              'The record fixture built with frame pointers, sampled by ehelf\'s program (its rows) '
              'and by the kernel\'s own walk of the user stack by frame pointers in a BPF program '
              '(bench_fp_walk: bpf_get_stackid with BPF_F_USER_STACK, each stack counted by thread: '
              'bpftrace\'s ustack, bcc\'s profile), alternated; medians of '
              f'{a.repeat} runs each of the program\'s run time per sample (kernel.bpf_stats_enabled). '
              'Libc has no frame pointers: the kernel\'s walk stops in it, ehelf\'s goes on to _start.',
              '', '| workload | Hz | ehelf ns/sample | frames | kernel FP walk ns/sample | frames | '
              'ehelf / FP walk | runs ehelf | runs FP walk |', '|---|---|---|---|---|---|---|---|---|']
    for r in peers:
        lines.append(
            f"| {r['workload']} | {r['freq']} | {r['ehelf_ns_per_sample']:.0f} | "
            f"{r['ehelf_frames']:.1f} | {r['fp_walk_ns_per_sample']:.0f} | "
            f"{r['fp_walk_frames']:.1f} | {r['ratio']:.2f} | "
            f"{', '.join(str(x) for x in r['ehelf_runs'])} | "
            f"{', '.join(str(x) for x in r['fp_walk_runs'])} |")
    open(a.md, 'w').write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
