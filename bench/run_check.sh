#!/usr/bin/env bash
# ehelf check's speed: instructions checked per second on programs compiled here (the libc
# program of the check tests at -O2 and -O0, a C++ program throwing across frames, four threads
# running the same code: tests/fixtures/check_threads.c) and on
# /bin/ls from the loader's entry, with straight-line runs to breakpoints (the default) and
# stepping every instruction (--single-step); next to the bare loop of a gdb+Python validator
# of the paper's kind (bench/check/gdb_step_rate.py) on the same program. Prints a Markdown table.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j2 --target ehelf > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread tests/fixtures/check_libc.c -o "$work/libc_O2"
gcc -O0 -pthread tests/fixtures/check_libc.c -o "$work/libc_O0"
g++ -O2 tests/fixtures/exceptions.cpp -o "$work/exceptions"
gcc -O2 -pthread tests/fixtures/check_threads.c -o "$work/threads"
row() { # label, ehelf check arguments...
  local label=$1
  shift
  { build/bin/ehelf check --json "$@" 2>/dev/null || true; } | python3 -c '
import json, sys
text = sys.stdin.read()
d = json.loads(text[text.index("{\n"):])
s = d["summary"]
print("| %s | %d | %d | %d | %.2f | %.0f |" % (sys.argv[1], s["checked"], s["distinct_addresses"],
      len(d["inconsistencies"]), s["seconds"], s["instructions_per_second"]))' "$label"
}
echo "| run | instructions checked | distinct addresses | inconsistencies | seconds | instructions/s |"
echo "| --- | --- | --- | --- | --- | --- |"
for mode in "" --single-step; do
  name=${mode:-runs to breakpoints}
  row "libc program -O2, $name" $mode -- "$work/libc_O2"
  row "libc program -O0, $name" $mode -- "$work/libc_O0"
  row "C++ exceptions -O2, $name" $mode -- "$work/exceptions"
  row "4 threads -O2, $name" $mode -- "$work/threads"
  row "/bin/ls /usr from the entry, $name" $mode --from-entry -- /bin/ls /usr
done
if command -v gdb > /dev/null; then
  gdb -q -batch -x bench/check/gdb_step_rate.py "$work/libc_O2" 2>/dev/null | grep "^gdb+python" |
    sed 's/^/gdb+Python bare step loop on the libc program -O2: /'
fi
