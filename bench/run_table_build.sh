#!/usr/bin/env bash
# Builds the release configuration and runs bench_table_build, writing
# bench/results/table_build.json. Extra arguments go to the benchmark (e.g. files to measure,
# --max-seconds S, --peer-runs N). EHELF_BENCH is forced ON in case the cache has it off.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DEHELF_BENCH=ON
cmake --build build -j2
mkdir -p bench/results
./build/bin/bench_table_build --ehelf build/bin/ehelf --json bench/results/table_build.json "$@"
