#!/usr/bin/env python3
"""ehelf perf's memory on a recording of more than 1 GiB, against perf script's.

xz -9 compresses 50 MB (16 MB random, the rest executables) under `perf record -e cpu-clock
-F 4000 --call-graph dwarf,16384`: ~1.8 GB of samples. Each reader runs once per output under
/usr/bin/time (peak RSS: anonymous memory plus the pages of the mapped recording it holds) and
once under a poller of /proc/PID/status (the peak of its anonymous memory alone). The same
recording in perf's pipe layout (`perf inject -o -`) is then read from standard input, as
`perf record -o - | ehelf perf` reads it.
"""
import argparse, json, os, platform, shutil, subprocess, sys, tempfile, time


def peak_anon(cmd, stdout, stdin=None):
    """Runs cmd; returns (exit status, peak RssAnon in kB) polled every 5 ms."""
    p = subprocess.Popen(cmd, stdout=stdout, stdin=stdin, stderr=subprocess.DEVNULL)
    peak = 0
    while p.poll() is None:
        try:
            for line in open(f'/proc/{p.pid}/status'):
                if line.startswith('RssAnon:'):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.005)
    return p.returncode, peak


def timed(cmd, stdout, stdin=None):
    """Runs cmd under /usr/bin/time; returns (wall s, peak RSS kB)."""
    r = subprocess.run(['/usr/bin/time', '-f', '%e %M'] + cmd, stdout=stdout, stdin=stdin,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f'failed: {" ".join(cmd)}: {r.stderr[-500:]}')
    wall, rss = r.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ehelf', required=True)
    ap.add_argument('--json', required=True)
    ap.add_argument('--md', required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix='ehelf-perf-memory-')
    try:
        data = os.path.join(work, 'input.bin')
        with open(data, 'wb') as f:
            f.write(os.urandom(16_000_000))
            left = 34_000_000
            for name in sorted(os.listdir('/usr/bin')):
                path = os.path.join('/usr/bin', name)
                if left <= 0 or not os.path.isfile(path):
                    continue
                chunk = open(path, 'rb').read(left)
                f.write(chunk)
                left -= len(chunk)
        rec = os.path.join(work, 'perf.data')
        subprocess.run(['perf', 'record', '-q', '-e', 'cpu-clock', '-F', '4000', '--call-graph',
                        'dwarf,16384', '-o', rec, '--', 'xz', '-9', '-k', '-c', '-T1', data],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        size = os.path.getsize(rec)
        piped = os.path.join(work, 'pipe.data')
        with open(piped, 'wb') as out:
            subprocess.run(['perf', 'inject', '-i', rec, '-o', '-'], stdout=out,
                           stderr=subprocess.DEVNULL, check=True)
        script_fields = ['--no-inline', '-F', 'comm,pid,tid,time,ip,sym,dso']
        runs = [
            ('ehelf perf -f folded', [a.ehelf, 'perf', '-f', 'folded', rec], None),
            ('ehelf perf (script layout)', [a.ehelf, 'perf', rec], None),
            ('perf script', ['perf', 'script', '-i', rec] + script_fields, None),
            ('ehelf perf -f folded, pipe layout on standard input',
             [a.ehelf, 'perf', '-f', 'folded', '-'], piped),
            ('ehelf perf (script layout), pipe layout on standard input',
             [a.ehelf, 'perf', '-'], piped),
            ('perf script, pipe layout on standard input',
             ['perf', 'script', '-i', '-'] + script_fields, piped),
        ]
        rows = []
        for label, cmd, stdin in runs:
            with open(os.devnull, 'wb') as null:
                with open(stdin or os.devnull, 'rb') as inp:
                    wall, rss = timed(cmd, null, inp)
                with open(stdin or os.devnull, 'rb') as inp:
                    status, anon = peak_anon(cmd, null, inp)
            rows.append({'reader': label, 'wall_s': wall, 'peak_rss_kib': rss,
                         'peak_anon_kib': anon, 'exit': status})
        meta = {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
                'kernel': platform.release(), 'cpus': os.cpu_count(),
                'recording_bytes': size, 'workload': 'xz -9 -T1 on 50 MB, perf record -F 4000 '
                '--call-graph dwarf,16384'}
        json.dump({'meta': meta, 'rows': rows}, open(a.json, 'w'), indent=1)
        with open(a.md, 'w') as md:
            md.write(f"ehelf perf's memory on a {size / 2**30:.2f} GiB recording ({meta['workload']}), "
                     f"{meta['date']}, kernel {meta['kernel']}, {meta['cpus']} CPUs\n\n")
            md.write('| reader | wall s | peak RSS | peak anonymous RSS |\n|---|---:|---:|---:|\n')
            for r in rows:
                md.write(f"| {r['reader']} | {r['wall_s']:.2f} | {r['peak_rss_kib'] / 1024:.0f} MiB | "
                         f"{r['peak_anon_kib'] / 1024:.0f} MiB |\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
