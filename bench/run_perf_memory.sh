#!/usr/bin/env bash
# ehelf perf's resident memory on a recording of more than 1 GiB (xz -9 at 4 kHz with 16 KiB
# stack copies) against perf script's: peak RSS and wall time of each output. Writes
# bench/results/perf_memory.{json,md}. Needs ~3 GB of free space in $TMPDIR.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source bench/common/prepare.sh
bench_prepare ehelf
python3 bench/perf/perf_memory.py --ehelf build/bin/ehelf \
  --json bench/results/perf_memory.json --md bench/results/perf_memory.md "$@"
cat bench/results/perf_memory.md
