#!/usr/bin/env python3
"""ehelf perf against perf script on several recordings (the target: 5x perf script's speed).

Records, with `perf record -e cpu-clock --call-graph dwarf`: the perf fixture, `xz -9`, python3,
g++ compiling a small C++ file, and the whole system (`-a`) while xz and python3 run. Then times,
on each recording, `perf script -F comm,pid,tid,time,ip,sym,dso --no-inline` (its own DWARF
unwinding), `ehelf perf` (the same layout), `ehelf perf -f folded` and perf's own folded-stack
collapser, `perf script --no-inline -s stackcollapse.py` (perf's port of FlameGraph's
stackcollapse-perf.pl, shipped with perf: the same output as `perf script | stackcollapse-perf.pl`,
whose run takes at least perf script's own time; --no-inline as for perf script, whose inlined
frames through addr2line took 51 s on the g++ recording): one untimed run, then the median wall and CPU time (user + system,
the process and its threads) of --runs runs, the four commands taking turns. The script layouts print one stack per sample and
the folded outputs' counts add up to the samples; both are checked equal before anything is
reported.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def quiet(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def timed(cmds, runs):
    """Median wall and CPU time of each command, the commands taking turns run after run: the
    machine's speed drifts by 20-40% over minutes here, and a ratio between commands timed in
    turn is not skewed by it as one between commands timed one after the other is."""
    for cmd in cmds:
        quiet(cmd)  # page cache, perf's build-id cache
    walls, cpus = [[] for _ in cmds], [[] for _ in cmds]
    for _ in range(runs):
        for k, cmd in enumerate(cmds):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            quiet(cmd)
            walls[k].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[k].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(walls, cpus)]


def samples(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, errors='replace').stdout
    return sum(1 for line in out.split('\n') if line and not line.startswith('\t'))


def folded_total(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, errors='replace').stdout
    return sum(int(line.rsplit(' ', 1)[1]) for line in out.split('\n') if line)


def stackcollapse_script():
    """perf's stackcollapse.py, under the directory `perf --exec-path` names."""
    exec_path = subprocess.run(['perf', '--exec-path'], check=True, stdout=subprocess.PIPE,
                               text=True).stdout.strip()
    path = os.path.join(exec_path, 'scripts', 'python', 'stackcollapse.py')
    if not os.path.exists(path):
        sys.exit(f'{path}: not found (perf without its scripts)')
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ehelf', required=True)
    ap.add_argument('--target', required=True, help='tests/fixtures/perf_target')
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    ap.add_argument('--runs', type=int, default=7)
    a = ap.parse_args()
    collapse = stackcollapse_script()
    work = tempfile.mkdtemp(prefix='ehelf-perf-speed-')
    data = os.path.join(work, 'random.bin')
    with open(data, 'wb') as f:
        f.write(os.urandom(24 << 20))
    script = os.path.join(work, 'work.py')
    open(script, 'w').write(
        'import json, re\n'
        'd = [{"a": i, "b": str(i) * 5} for i in range(200000)]\n'
        'json.loads(json.dumps(d)); sorted(d, key=lambda x: x["b"])\n'
        'for i in range(300000): re.match(r"(\\d+)x", str(i) + "x")\n')
    cpp = os.path.join(work, 'unit.cpp')
    open(cpp, 'w').write('#include <map>\n#include <regex>\n#include <string>\n#include <vector>\n'
                         'int main() { std::map<std::string, std::vector<int>> m; '
                         'std::regex r("a+b"); return int(m.size()); }\n')
    record = ['perf', 'record', '-q', '-e', 'cpu-clock', '--call-graph', 'dwarf']
    workloads = [
        ('perf fixture (3 threads, qsort)', ['-F', '1000', '--', a.target, '5']),
        ('xz -9', ['-F', '1000', '--', 'xz', '-9', '-k', '-c', '-T1', data]),
        ('python3', ['-F', '1000', '--', 'python3', script]),
        ('g++ -O2 -c', ['-F', '1000', '--', 'g++', '-O2', '-c', cpp, '-o', os.devnull]),
        ('system-wide (-a) with xz and python3', ['-a', '-F', '500', '--', 'sleep', '4']),
    ]
    rows = []
    for name, args in workloads:
        path = os.path.join(work, f'{len(rows)}.data')
        background = []
        if '-a' in args:
            background = [subprocess.Popen(['xz', '-9', '-c', '-T1', data], stdout=subprocess.DEVNULL),
                          subprocess.Popen(['python3', script])]
        quiet(record + ['-o', path] + args)
        for p in background:
            p.kill()
            p.wait()
        perf_cmd = ['perf', 'script', '-i', path, '-F', 'comm,pid,tid,time,ip,sym,dso', '--no-inline']
        ehelf_cmd = [a.ehelf, 'perf', path]
        n_perf, n_ehelf = samples(perf_cmd), samples(ehelf_cmd)
        if n_perf != n_ehelf:
            sys.exit(f'{name}: perf script printed {n_perf} samples, ehelf perf {n_ehelf}')
        collapse_cmd = ['perf', 'script', '-i', path, '--no-inline', '-s', collapse]
        folded_cmd = [a.ehelf, 'perf', '-f', 'folded', path]
        n_collapse, n_folded = folded_total(collapse_cmd), folded_total(folded_cmd)
        if n_collapse != n_perf or n_folded != n_perf:
            sys.exit(f'{name}: {n_perf} samples, stackcollapse.py folded {n_collapse}, '
                     f'ehelf perf -f folded {n_folded}')
        perf_t, script_t, folded_t, collapse_t = timed(
            [perf_cmd, ehelf_cmd, folded_cmd, collapse_cmd], a.runs)
        rows.append({'recording': name, 'samples': n_perf, 'mib': round(os.path.getsize(path) / 2**20, 1),
                     'perf_script_s': perf_t, 'ehelf_script_s': script_t, 'ehelf_folded_s': folded_t,
                     'perf_stackcollapse_s': collapse_t,
                     'speedup_script_wall': round(perf_t[0] / script_t[0], 2),
                     'speedup_script_cpu': round(perf_t[1] / script_t[1], 2),
                     'speedup_folded_wall': round(perf_t[0] / folded_t[0], 2),
                     'speedup_folded_vs_stackcollapse_wall': round(collapse_t[0] / folded_t[0], 2)})
        print(rows[-1], file=sys.stderr)
    meta = {'date': datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC'),
            'machine': f'{platform.processor() or platform.machine()}, {os.cpu_count()} cores, '
                       f'Linux {platform.release()}',
            'load': os.getloadavg()[0], 'runs': a.runs}
    json.dump({'meta': meta, 'rows': rows}, open(a.json, 'w'), indent=1)
    with open(a.md, 'w') as md:
        md.write(f"# ehelf perf against perf script\n\n{meta['date']}, {meta['machine']}, load average "
                 f"{meta['load']:.1f} at the end; median of {a.runs} runs of each command, the commands taking turns, after one untimed run. "
                 "Command: `bash bench/run_perf_speed.sh`.\n\n")
        md.write('| recording | samples | MiB | perf script s (wall / cpu) | ehelf perf s | '
                 'ehelf perf -f folded s | perf script -s stackcollapse.py s | faster (wall) | '
                 'faster (cpu) | folded faster (wall) | folded faster than stackcollapse (wall) |\n')
        md.write('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n')
        for r in rows:
            f = lambda t: f'{t[0]:.3f} / {t[1]:.3f}'
            md.write(f"| {r['recording']} | {r['samples']} | {r['mib']} | {f(r['perf_script_s'])} | "
                     f"{f(r['ehelf_script_s'])} | {f(r['ehelf_folded_s'])} | "
                     f"{f(r['perf_stackcollapse_s'])} | {r['speedup_script_wall']}x | "
                     f"{r['speedup_script_cpu']}x | {r['speedup_folded_wall']}x | "
                     f"{r['speedup_folded_vs_stackcollapse_wall']}x |\n")


if __name__ == '__main__':
    main()
