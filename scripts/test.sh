#!/usr/bin/env bash
# The test job: install, build the ASan+UBSan configuration, run the fuzz targets briefly, then
# the whole test suite with ctest; then ehelf perf's two threads under ThreadSanitizer (a build
# of the ehelf binary alone).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh asan
bash scripts/fuzz.sh "${EHELF_FUZZ_SECONDS:-20}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j2 --timeout 1200)
bash scripts/build.sh tsan
bash tests/scripts/threads_under_tsan.sh build-tsan/bin/ehelf
