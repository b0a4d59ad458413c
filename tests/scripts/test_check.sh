#!/usr/bin/env bash
# `ehelf check` from the command line: exit 1 and the report's lines for wrong CFI, 0 for a
# correct program, 2 for usage and tracing errors (one line on stderr), --only, --json (parsed),
# --max-steps. The checks themselves are tested in tests/unit/test_check.cpp.
source "$(dirname "$0")/common.sh" "$@"
fixtures="$(cd "$build" && pwd)/tests/fixtures"

"$ehelf" check -- "$fixtures/check_pop_adjust" >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "check_pop_adjust: 0x[0-9a-f]* pops+0xc: ret$" "$work/out" &&
    grep -q "^  row: CFA=rsp+16 ra=c-8$" "$work/out" &&
    grep -q "^  CFA: expected rsp+8, table says rsp+16$" "$work/out" &&
    grep -q "^1 inconsistency; " "$work/out" && grep -q "instructions/s; exited with 0$" "$work/out"; then
  ok "wrong CFI: exit 1, $(head -1 "$work/out")"
else
  bad "wrong CFI: rc=$rc"; cat "$work/out" "$work/err"
fi

"$ehelf" check -- "$fixtures/check_correct" >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "^0 inconsistencies; " "$work/out"; then
  ok "correct: exit 0, $(grep inconsistencies "$work/out")"
else
  bad "correct: rc=$rc"; cat "$work/out" "$work/err"
fi

# --only: the fixture's own module is not checked, so its wrong row is not seen.
"$ehelf" check --only libc.so.6 -- "$fixtures/check_pop_adjust" >"$work/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^0 inconsistencies; 0 instructions checked" "$work/out"; then
  ok "--only libc.so.6: exit 0"
else
  bad "--only: rc=$rc"; cat "$work/out"
fi

"$ehelf" check --json -- "$fixtures/check_save_offset" >"$work/json" 2>&1
rc=$?
if [ $rc -eq 1 ] && python3 - "$work/json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
[r] = d["inconsistencies"]
assert r["column"] == "rbx" and r["expected"] == "c-16" and r["table"] == "c-24", r
assert r["function"] == "saves+0x6" and r["instruction"] == "pop %rbx", r
s = d["summary"]
assert s["checked"] > 5 and s["instructions_per_second"] > 0 and s["calls"] == 1, s
PY
then
  ok "--json: one rbx inconsistency, parsed"
else
  bad "--json: rc=$rc"; cat "$work/json"
fi

"$ehelf" check --max-steps 5 -- "$fixtures/check_correct" >"$work/out" 2>&1
if grep -q "(5 steps)" "$work/out" && grep -q "stopped at the step limit" "$work/out"; then
  ok "--max-steps 5"
else
  bad "--max-steps"; cat "$work/out"
fi

expect_usage() { # name, expected stderr text, arguments...
  local name=$1 want=$2
  shift 2
  "$ehelf" check "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$want" "$work/err" && [ "$(wc -l <"$work/err")" -eq 1 ]; then
    ok "$name: exit 2, $(cat "$work/err")"
  else
    bad "$name: rc=$rc"; cat "$work/err"
  fi
}
expect_usage no-program "command is required"
expect_usage missing-program "cannot run $work/none: No such file or directory" -- "$work/none"
expect_usage no-symbol "no symbol nothing_here" --from nothing_here -- "$fixtures/check_correct"
expect_usage both-starts "excludes" --from main --from-entry -- "$fixtures/check_correct"
exit $fail
