#!/usr/bin/env bash
# `ehelf stats` end to end: the paper's tables are printed, the DW_CFA opcode histogram equals
# readelf's raw dump for libc, and the whole of /usr/lib/x86_64-linux-gnu is scanned (its speed
# is bench/results/stats.md's, not this test's).
# Usage: test_stats.sh BUILD_DIR [SOURCE_DIR]
set -euo pipefail

build=${1:?build dir}
bin=$build/bin/ehelf
lib=/usr/lib/x86_64-linux-gnu
libc=$lib/libc.so.6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -x "$bin" ] || { echo "FAIL: $bin not built"; exit 1; }
if [ ! -e "$libc" ] || ! command -v readelf >/dev/null; then
  echo "SKIP: needs $libc and readelf"
  exit 77
fi

"$bin" stats --no-progress "$libc" >"$tmp/text"
for heading in "Table 3" "Unsupported register rule" "Expressions seen" "Table 4" \
               "Val_expression" "Only supp." "All columns" "DW_CFA opcodes" \
               "Most common expressions" "Rows per FDE"; do
  grep -qF "$heading" "$tmp/text" || { echo "FAIL: no '$heading' in the text output"; exit 1; }
done

# Opcode histogram: our table's "  DW_CFA_x  COUNT  PCT" lines against readelf's instruction lines.
awk '/^DW_CFA opcodes/ {on=1; next} on && /^$/ {on=0} on && $1 ~ /^DW_CFA_/ {print $1, $2}' \
  "$tmp/text" | sort >"$tmp/ours"
readelf -wN --debug-dump=frames "$libc" 2>/dev/null | grep -oE '^  DW_CFA_[A-Za-z0-9_]+' |
  sort | uniq -c | awk '{print $2, $1}' | sort >"$tmp/readelf"
if ! diff -u "$tmp/readelf" "$tmp/ours"; then
  echo "FAIL: DW_CFA opcode histogram differs from readelf"
  exit 1
fi

# JSON is one object with the same tables.
"$bin" stats --json --top 3 "$libc" >"$tmp/json"
for key in '"table3"' '"table4"' '"cfa_opcodes"' '"dw_ops"' '"top_expressions"' '"rows_per_fde"'; do
  grep -qF "$key" "$tmp/json" || { echo "FAIL: no $key in the JSON output"; exit 1; }
done

# The whole library directory, two threads: every table printed, files scanned.
"$bin" stats --no-progress "$lib" >"$tmp/all"
for heading in "Table 3" "Table 4" "DW_CFA opcodes"; do
  grep -qF "$heading" "$tmp/all" || { echo "FAIL: no '$heading' in the output for $lib"; exit 1; }
done
grep -qE '^Files \(of [1-9][0-9]* scanned\)' "$tmp/all" || { echo "FAIL: no file scanned in $lib"; exit 1; }
grep -F "Time:" "$tmp/all"
echo "PASS"
