#!/usr/bin/env bash
# The in-kernel walk against the user-space walk of the same samples, system-wide (-a) on a busy
# machine: compression (xz), an interpreter (python3), a compiler loop (g++), a database
# (sqlite3) and a threaded program, each in a loop, while `ehelf record -a --unwind kernel` runs
# in copy mode (every Nth sample is also handed to perf with its stack copy and walked in user
# space), and `perf record -a` beside it. Prints the summary's copy mode line (identical share,
# each difference by category) and each program's share of the samples under both; fails if
# any difference is "other" or a program's share differs from perf's by more than 5 points. A campaign outside the default CI (root, ~25 s);
# test_record_kernel.sh checks the same comparison program by program.
#
#   bash scripts/kernel-busy-compare.sh [BUILD_DIR] [SECONDS] [EVERY]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
seconds="${2:-15}"
every="${3:-4}"
ehelf="$build/bin/ehelf"
target="$build/tests/fixtures/record_target"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the in-kernel walk needs root"
  exit 77
fi
for tool in xz python3 g++ sqlite3 perf; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
work=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT
head -c 8000000 /dev/urandom > "$work/input.bin"
printf '#include <map>\n#include <string>\nstd::map<std::string, int> m;\nint f() { m["a"] = 1; return int(m.size()); }\n' > "$work/unit.cpp"

busy() { # runs CMD... in a loop until the time is up
  local end=$((SECONDS + seconds + 4))
  while [ $SECONDS -lt $end ]; do "$@" > /dev/null 2>&1 || true; done
}
busy xz -9 -k -T1 -c "$work/input.bin" &
busy python3 -c 'import json; d=[{"k": i, "v": str(i)*5} for i in range(200000)]; json.loads(json.dumps(d)); sorted(d, key=lambda x: x["v"])' &
busy g++ -O2 -c "$work/unit.cpp" -o "$work/unit.o" &
busy sqlite3 :memory: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<1000000) SELECT count(*), sum(x*x % 7) FROM c;' &
busy "$target" threads 100 &
sleep 2
# perf samples the same period beside it: each program's share of the machine's samples is the
# independent oracle of what -a attributes where (perf's own stacks are not compared: copy mode
# compares ehelf's two walks of the very same samples).
perf record -q -a -F 999 -o "$work/perf.data" -- sleep "$seconds" > /dev/null 2>&1 &
perf_pid=$!
# (Copies of the largest size perf takes: the user-space walk of a copy stops where the copy
# ends, and a deep stack's outermost frames are past the default 16 KiB.)
"$ehelf" record -a --unwind kernel --kernel-copy-every "$every" --stack-size 65528 -d "$seconds" \
  -o "$work/all.folded" 2> "$work/all.err"
wait "$perf_pid" || true
wait
grep -A20 'walked in the kernel' "$work/all.err"
perf script -i "$work/perf.data" -F comm 2> /dev/null > "$work/perf.comms" || true
python3 - "$work/all.folded" "$work/perf.comms" << 'PY' || exit 1
import collections, sys
ours, theirs = collections.Counter(), collections.Counter()
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip('\n').rpartition(' ')
    ours[stack.split(';', 1)[0]] += int(n)
for line in open(sys.argv[2]):
    theirs[line.strip()] += 1
for c in (ours, theirs):  # the two profilers see each other
    for name in ('ehelf', 'perf'):
        c.pop(name, None)
a, b = sum(ours.values()), sum(theirs.values())
if a < 1000 or b < 1000:
    print(f"FAIL: too few samples to compare shares (ehelf {a}, perf {b})")
    sys.exit(1)
worst = 0.0
print("share of the samples by program (ehelf -a, kernel walk / perf record -a):")
for name, n in theirs.most_common(8):
    x, y = 100.0 * ours[name] / a, 100.0 * n / b
    worst = max(worst, abs(x - y))
    print(f"  {name:16} {x:5.1f}% / {y:5.1f}%")
# Two samplers of the same 15 s do not sample the same instants: a few points apart at most.
if worst > 5.0:
    print(f"FAIL: a program's share differs by {worst:.1f} points")
    sys.exit(1)
print(f"PASS: every program's share within {worst:.1f} points of perf's")
PY
line=$(grep 'copy mode: ' "$work/all.err" || true)
[ -n "$line" ] || { echo "FAIL: no copy mode line"; exit 1; }
other=$(grep -oE '[0-9]+ other' <<< "$line" | grep -oE '[0-9]+')
if [ "${other:-1}" -ne 0 ]; then
  echo "FAIL: ${other:-?} samples differ otherwise"
  exit 1
fi
echo "PASS: no sample differs but by a known category"
# Issue 30's target: 99.9%. What is left is a few processes that exited before user space read
# their mappings (99.93-99.99% identical in runs of 2026-11-30 since samples wait in the kernel
# for their tables; 99.7-99.87% before; 96% before sampling waited for the running programs'
# tables, the program found a new process's executable itself and every side-band record woke
# the reader in copy mode too).
share=$(grep -oE 'identical \(([0-9.]+)%\)' <<< "$line" | grep -oE '[0-9.]+')
if ! python3 -c "import sys; sys.exit(0 if float('${share:-0}') >= 99.9 else 1)"; then
  echo "FAIL: ${share:-?}% identical, under 99.9%"
  exit 1
fi
echo "PASS: ${share}% of the samples walked both ways identical"
