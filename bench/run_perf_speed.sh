#!/usr/bin/env bash
# ehelf perf against perf script on five recordings (the fixture, xz -9, python3, g++, the whole
# system): wall and CPU time, median of runs. Writes bench/results/perf_speed.{json,md}.
# Arguments go to bench/perf/perf_speed.py (--runs N).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source bench/common/prepare.sh
bench_prepare ehelf fixtures
python3 bench/perf/perf_speed.py --ehelf build/bin/ehelf --target build/tests/fixtures/perf_target \
  --json bench/results/perf_speed.json --md bench/results/perf_speed.md "$@"
cat bench/results/perf_speed.md
