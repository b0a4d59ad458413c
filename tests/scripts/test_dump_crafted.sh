#!/usr/bin/env bash
# `ehelf dump` must print exactly what `readelf -wF` prints on hostile files too: crafted_cfi.py
# writes several hundred ELF files with broken call-frame tables (bad registers, every pointer
# encoding, odd CIEs, truncated instructions, bad lengths and section headers), and each must
# give the same standard output and the same exit status class (0 or not) as readelf (but 1 wherever
# ehelf warns of a malformed table, where readelf exits 0), without a
# crash. The diffs of the first failures are printed.
set -uo pipefail
build=$1
src=$2
ehelf="$build/bin/ehelf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

count=$(python3 "$src/tests/scripts/crafted_cfi.py" "$work/files") || { echo "FAIL: generator"; exit 1; }
echo "comparing $count crafted files"
fail=0
shown=0
for f in "$work"/files/*; do
  name=$(basename "$f")
  readelf -wF "$f" >"$work/r" 2>/dev/null
  rrc=$?
  "$ehelf" dump "$f" >"$work/e" 2>"$work/err"
  erc=$?
  warned=0
  grep -q '^ehelf: warning: ' "$work/err" && warned=1
  problem=""
  if [ $erc -ge 128 ]; then problem="ehelf crashed (status $erc)"
  elif ! cmp -s "$work/r" "$work/e"; then problem="output differs"
  # Status: readelf's (0 or not), except that a complaint (a warning) makes ehelf's 1.
  elif [ $(((rrc == 0) && ! warned)) -ne $((erc == 0)) ]; then
    problem="exit status $erc, readelf's $rrc, warnings: $warned"
  fi
  [ -z "$problem" ] && continue
  fail=$((fail + 1))
  echo "FAIL $name: $problem"
  if [ $shown -lt 20 ]; then
    shown=$((shown + 1))
    diff "$work/r" "$work/e" | head -20 | sed 's/^/    /'
    head -3 "$work/err" | sed 's/^/    stderr: /'
  fi
done
# Several files at once: readelf names each ("File: NAME"), and one NOBITS section makes it exit 1.
group=$(ls "$work"/files/* | awk 'NR % 97 == 1' | tr '\n' ' ')
readelf -wF $group >"$work/r" 2>/dev/null
rrc=$?
"$ehelf" dump $group >"$work/e" 2>"$work/err"
erc=$?
warned=0
grep -q '^ehelf: warning: ' "$work/err" && warned=1
if ! cmp -s "$work/r" "$work/e" || [ $(((rrc == 0) && ! warned)) -ne $((erc == 0)) ]; then
  fail=$((fail + 1))
  echo "FAIL several files at once: status $erc, readelf's $rrc"
  diff "$work/r" "$work/e" | head -20 | sed 's/^/    /'
fi
echo "$((count - fail)) of $count identical"
[ $fail -eq 0 ]
