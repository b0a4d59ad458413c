#!/usr/bin/env bash
# No command ends in an uncaught exception: commands reading a large file (ehelf's own binary,
# and libLLVM when installed) under address-space limits from 32 MB to 384 MB (ulimit -v) either
# succeed or fail with one line on stderr and a non-zero exit status, never a signal (SIGABRT
# from std::terminate was the way they ended). ehelf perf with its two threads (-j 2) is among
# them. Under AddressSanitizer, whose shadow memory cannot be
# reserved within such limits, the test is skipped (exit 77).
source "$(dirname "$0")/common.sh" "$@"
cd "$work" || exit 1

if [ $sanitized = 1 ] ||
  ! (ulimit -v 64000 && "$ehelf" --version >/dev/null 2>&1); then
  echo "SKIP: $ehelf cannot run under ulimit -v (a sanitizer build)"
  exit 77
fi

cat >spin.c <<'EOF'
#include <stdio.h>
__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }
int main(void) {
  long sum = 0;
  for (long i = 0; i < 40000000L; ++i) sum += leaf(i);
  printf("%ld\n", sum);
  return 0;
}
EOF
cc -O1 -o spin spin.c || { bad "cc spin.c"; exit 1; }

inputs=("$ehelf")
llvm=$(ls /usr/lib/x86_64-linux-gnu/libLLVM-*.so.1 2>/dev/null | head -1)
[ -n "$llvm" ] && inputs+=("$llvm")
commands=()
for f in "${inputs[@]}"; do
  commands+=("dump --json $f" "synth $f -o /dev/null" "stats $f" "verify $f")
done
if command -v perf >/dev/null &&
  perf record -q -e cpu-clock -F 999 --call-graph dwarf -o perf.data -- ./spin >/dev/null 2>&1; then
  commands+=("perf -j 2 perf.data" "perf -j 2 -f folded perf.data")
else
  echo "SKIP ehelf perf: perf record does not work here"
fi

runs=0 out_of_memory=0
for cmd in "${commands[@]}"; do
  worst="" bitten=0
  for limit in 32000 64000 96000 128000 192000 256000 384000; do
    # shellcheck disable=SC2086 # the command's words
    (ulimit -v $limit && exec timeout 300 "$ehelf" $cmd) >run.out 2>run.err </dev/null
    rc=$?
    runs=$((runs + 1))
    if [ $rc -ge 124 ]; then
      worst="killed (status $rc) at $limit KB: $(head -2 run.err | tr '\n' '|')"
      break
    elif [ $rc -ne 0 ] && { [ "$(wc -l <run.err)" != 1 ] || ! grep -q '^ehelf: ' run.err; }; then
      worst="not one line at $limit KB (status $rc): $(head -3 run.err | tr '\n' '|')"
      break
    fi
    grep -q 'out of memory\|Cannot allocate memory' run.err && bitten=$((bitten + 1))
  done
  name=${cmd//$ehelf/ehelf}
  name=${name//$work\//}
  out_of_memory=$((out_of_memory + bitten))
  if [ -z "$worst" ]; then
    ok "$name: every limit a success or one line ($bitten out of memory)"
  else
    bad "$name: $worst"
  fi
done
# The limits must have bitten, or the test proved nothing.
if [ $out_of_memory -gt 0 ]; then
  ok "$out_of_memory of $runs runs ran out of memory, each with one line"
else
  bad "no run of $runs ran out of memory: the limits are too high to test anything"
fi
exit $fail
