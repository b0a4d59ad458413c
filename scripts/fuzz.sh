#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for N seconds (default 30)
# on a copy of its checked-in seed corpus. Exits non-zero on any crash, leak or timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEHELF_SANITIZE=ON -DEHELF_FUZZ=ON -DEHELF_TESTS=OFF -DEHELF_BENCH=OFF >/dev/null
cmake --build build-fuzz -j2 --target $(cd fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//') >/dev/null
for src in fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  seeds="fuzz/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  if [ "$name" = fuzz_elf ]; then
    # ELF seeds are built from the fixtures here rather than committed as binaries.
    cc -O2 tests/fixtures/recursion.c -o "$work/recursion" && strip "$work/recursion"
    cc -nostartfiles -static -nostdlib tests/fixtures/cfi_variety.S -o "$work/cfi_variety"
    cc -O2 -g -fno-asynchronous-unwind-tables -c tests/fixtures/recursion.c -o "$work/rec.o"
  fi
  echo "fuzz: $name for ${seconds}s ($(ls "$work" | wc -l) seeds)"
  if ! build-fuzz/bin/"$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=0 "$work" >"$work.log" 2>&1; then
    tail -40 "$work.log"
    echo "fuzz: $name FAILED" >&2
    exit 1
  fi
  grep -E "^#[0-9]+ *DONE" "$work.log" | tail -1 || true
  rm -rf "$work" "$work.log"
done
