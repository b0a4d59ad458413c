#!/usr/bin/env bash
# The first unwind of a process: libehelf-unwind against libunwind (in-process time of the first
# and second unw_backtrace / unw_step walk, and whole-process wall time with and without it).
# Writes bench/results/first_call.json and bench/results/first_call.md.
# Environment: FIRST_CALL_RUNS (processes per variant, default 41).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source bench/common/prepare.sh
bench_prepare
python3 bench/first_call/first_call.py --build build --json bench/results/first_call.json \
  --md bench/results/first_call.md "$@"
cat bench/results/first_call.md
