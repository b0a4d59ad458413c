#!/usr/bin/env python3
"""The first unwind of a process, ehelf's C library against libunwind's, side by side.

Builds bench/first_call/first_call.c against libehelf-unwind (installed from the build tree into
a temporary prefix) and against libunwind (Debian's libunwind-dev), with unw_backtrace and with an
unw_step loop, then for each:
  * first call: the in-process time of the process's first unwind (median of RUNS processes);
  * second call: the same walk again (what steady-state costs);
  * process: the CPU time (user + system) of the whole process that makes that one unwind, and
    of the same process making none (the library's load-time cost shows there: ehelf builds its
    module view in a constructor), medians of RUNS runs.
Writes JSON and Markdown."""
import argparse, json, os, platform, statistics, subprocess, sys, tempfile, time

def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout

def cpu_run(cmd, env):
    """Runs cmd; returns (stdout, CPU seconds of the process: user + system, from wait4). CPU
    time, unlike wall time, does not count the waits of a shared machine."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd)
    return out, ru.ru_utime + ru.ru_stime

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default='build')
    ap.add_argument('--runs', type=int, default=int(os.environ.get('FIRST_CALL_RUNS', '41')))
    ap.add_argument('--depth', type=int, default=30)
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp()
    prefix = os.path.join(tmp, 'prefix')
    run(['cmake', '--install', a.build, '--prefix', prefix])
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, 'lib', 'pkgconfig'),
               LD_LIBRARY_PATH=os.path.join(prefix, 'lib'))
    ours = run(['pkg-config', '--cflags', '--libs', 'ehelf-unwind'], env=env).split()
    src = os.path.join(here, 'first_call.c')
    # A few more libraries than libc, as real programs have (each is one module more to know).
    extra = ['-lm', '-lz', '-lstdc++']
    variants = []
    for api, flags in (('unw_backtrace', []), ('unw_step loop', ['-DUSE_STEP'])):
        for lib, link in (('ehelf', ours), ('libunwind', ['-lunwind'])):
            exe = os.path.join(tmp, f"{lib}-{'step' if flags else 'bt'}")
            run(['cc', '-O2', '-o', exe, src] + flags + link + extra, env=env)
            variants.append((api, lib, exe))
    rows = []
    for api, lib, exe in variants:
        firsts, seconds, frames, walls, idle = [], [], [], [], []
        for _ in range(a.runs):
            out, cpu = cpu_run([exe, str(a.depth)], env)
            walls.append(cpu)
            n, f, s = out.split()
            frames.append(int(n)); firsts.append(int(f)); seconds.append(int(s))
        for _ in range(a.runs):
            idle.append(cpu_run([exe, '0'], env)[1])
        rows.append(dict(api=api, library=lib, frames=statistics.median(frames),
                         first_call_us=statistics.median(firsts) / 1e3,
                         second_call_us=statistics.median(seconds) / 1e3,
                         process_ms=statistics.median(walls) * 1e3,
                         process_without_unwind_ms=statistics.median(idle) * 1e3))
    for r in rows:
        peer = next(p for p in rows if p['api'] == r['api'] and p['library'] == 'libunwind')
        r['first_call_vs_libunwind'] = r['first_call_us'] / peer['first_call_us']
        r['process_vs_libunwind'] = r['process_ms'] / peer['process_ms']
    meta = dict(date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), machine=platform.processor()
                or platform.machine(), kernel=platform.release(), runs=a.runs, depth=a.depth,
                load=os.getloadavg()[0],
                commit=run(['git', 'rev-parse', '--short', 'HEAD'], cwd=here).strip())
    with open(a.json, 'w') as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    lines = [f"Date: {meta['date']}. Kernel {meta['kernel']}, load average {meta['load']:.1f}. "
             f"Command: `bash bench/run_first_call.sh`. ehelf {meta['commit']}. "
             f"Chain of {a.depth} frames, medians of {a.runs} processes each.", '',
             '| walk | library | frames | first call (us) | vs libunwind | second call (us) | '
             'process CPU with the unwind (ms) | process CPU without (ms) |',
             '|---|---|---:|---:|---:|---:|---:|---:|']
    for r in rows:
        lines.append(f"| {r['api']} | {r['library']} | {r['frames']:.0f} | {r['first_call_us']:.1f} | "
                     f"{r['first_call_vs_libunwind']:.2f}x | {r['second_call_us']:.1f} | "
                     f"{r['process_ms']:.2f} | {r['process_without_unwind_ms']:.2f} |")
    with open(a.md, 'w') as f:
        f.write('\n'.join(lines) + '\n')

if __name__ == '__main__':
    sys.exit(main())
