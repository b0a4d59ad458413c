#!/usr/bin/env bash
# `ehelf perf`'s reader on the recordings' shapes that once blew up its time: 40,000 mappings in
# one process (carving them was quadratic) and 4,000 forks of a process with 4,000 mappings (each
# fork copied them all). The unit test PerfDataHostile.ManyMappingsAndForksStayCheap builds the
# recordings, reads them and checks their memory; it records each shape's time as a property,
# which this script takes from gtest's JSON report (the best of RUNS runs, 3 by default) and
# writes to bench/results/perf_hostile.md.
# Usage: bash bench/run_perf_hostile.sh [RUNS]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
runs=${1:-3}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j2 --target ehelf_unit_tests > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq "$runs"); do
  build/bin/ehelf_unit_tests --gtest_filter=PerfDataHostile.ManyMappingsAndForksStayCheap \
    --gtest_output="json:$work/run$i.json" > /dev/null
done
mkdir -p bench/results
python3 - "$work" "$runs" > bench/results/perf_hostile.md << 'PY'
import glob, json, platform, subprocess, sys, time
work, runs = sys.argv[1], int(sys.argv[2])
best = {}
for path in glob.glob(work + '/run*.json'):
    for suite in json.load(open(path))['testsuites']:
        for case in suite['testsuite']:
            for key, value in case.items():
                if key.startswith('seconds_'):
                    best[key] = min(best.get(key, float('inf')), float(value))
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), '?')
load = open('/proc/loadavg').read().split()[0]
print('# `ehelf perf` on hostile recordings: many mappings, many forks\n')
print(f'Measured on {time.strftime("%Y-%m-%d", time.gmtime())}, Linux {platform.release()}, '
      f'{cpu}, load average {load}. Rerun: `bash bench/run_perf_hostile.sh` (release build; the '
      f'best of {runs} runs of the unit test PerfDataHostile.ManyMappingsAndForksStayCheap, which '
      'builds the recordings in memory, parses them and feeds every record to the unwinder).\n')
print('| recording | seconds |')
print('| --- | --- |')
for key in sorted(best, key=lambda k: [int(n) for n in k.split('_')[1:]], reverse=True):
    mappings, forks = key.split('_')[1:]
    print(f'| {int(mappings):,} mappings, {int(forks):,} forks | {best[key]:.3f} |')
PY
cat bench/results/perf_hostile.md
