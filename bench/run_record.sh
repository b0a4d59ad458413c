#!/usr/bin/env bash
# ehelf record against perf record --call-graph dwarf: slowdown, output size, time from
# the workload's end to a flame graph, lost samples and top-20 agreement, at 999 Hz and 4 kHz on a
# C program, xz -9, python3 and a two-thread program. Writes bench/results/record.{json,md}.
# Arguments go to bench/record/record_bench.py (--quick: short workloads; --freqs 999).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source bench/common/prepare.sh
bench_prepare ehelf fixtures
python3 bench/record/record_bench.py --ehelf build/bin/ehelf --fixtures build/tests/fixtures \
  --json bench/results/record.json --md bench/results/record.md "$@"
cat bench/results/record.md
