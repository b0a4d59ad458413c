#!/usr/bin/env bash
# The perf.data reader against perf itself: records tests/fixtures/perf_target (three threads
# recursing through qsort, -O2 -fomit-frame-pointer) with `perf record --call-graph dwarf`, then
# times turning the recording into stacks: `perf script` (its own DWARF unwinder) and
# `ehelf perf` (every backend, script and folded output), median of several runs, and checks that
# both give the same frames. Writes bench/results/perf.json and bench/results/perf.md.
#
# Environment: PERF_BENCH_SECONDS (how long the recorded fixture runs, default 5 s),
# PERF_BENCH_RUNS (timed runs per command, default 5).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source bench/common/prepare.sh
bench_prepare
python3 bench/perf/perf_bench.py --ehelf build/bin/ehelf --target build/tests/fixtures/perf_target \
  --json bench/results/perf.json --md bench/results/perf.md "$@"
cat bench/results/perf.md
