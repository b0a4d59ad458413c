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

# A program as Debian ships it, stripped of .symtab: checked from main all the same (found from
# _start's call to __libc_start_main; tests/unit/test_check.cpp compares it with nm's).
"$ehelf" check --max-steps 20000 -- xz --version >"$work/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -q "\.symtab" <<<"$(readelf -S "$(command -v xz)")" &&
    grep -q "^0 inconsistencies; 20000 instructions checked" "$work/out"; then
  ok "stripped /usr/bin/xz: from main, $(grep -o "[0-9]* calls" "$work/out")"
else
  bad "stripped xz: rc=$rc"; cat "$work/out"
fi

"$ehelf" check --max-steps 5 -- "$fixtures/check_correct" >"$work/out" 2>&1
if grep -q "(5 steps)" "$work/out" && grep -q "stopped at the step limit" "$work/out"; then
  ok "--max-steps 5"
else
  bad "--max-steps"; cat "$work/out"
fi

# --record / --replay: the replay of a wrong-CFI run prints the live run's report lines; the run
# judged by tables ehelf synth -o recomputed from the machine code gives none, for a correct
# program and for the wrong-CFI fixture (the synthesizer's tables are right where the
# hand-written CFI is wrong).
"$ehelf" check --record "$work/pop.trace" -- "$fixtures/check_pop_adjust" > "$work/live" 2>&1
"$ehelf" check --replay "$work/pop.trace" > "$work/replayed" 2>&1
rc=$?
if [ $rc -eq 1 ] && diff <(grep -v instructions/s "$work/live") <(grep -v instructions/s "$work/replayed") &&
    grep -q "CFA: expected rsp+8, table says rsp+16" "$work/replayed"; then
  ok "--replay: the live run's report ($(stat -c %s "$work/pop.trace") bytes of trace)"
else
  bad "--replay: rc=$rc"; cat "$work/live" "$work/replayed"
fi
for prog in check_correct check_pop_adjust; do
  "$ehelf" synth "$fixtures/$prog" -o "$work/$prog.synth" > /dev/null 2>&1 || bad "synth $prog"
  "$ehelf" check --record "$work/$prog.trace" -- "$fixtures/$prog" > /dev/null 2>&1
  "$ehelf" check --replay "$work/$prog.trace" --tables "$prog=$work/$prog.synth" > "$work/out" 2>&1
  rc=$?
  checked=$(grep -o "[0-9]* instructions checked" "$work/out")
  if [ $rc -eq 0 ] && grep -q "^0 inconsistencies; " "$work/out" && ! grep -q "not judged" "$work/out" &&
      [ "${checked%% *}" -gt 5 ]; then
    ok "--replay $prog --tables (ehelf synth -o): none, $checked"
  else
    bad "--replay $prog --tables synth: rc=$rc"; cat "$work/out"
  fi
done

# --follow-fork: the forked child's wrong CFI is found (by default the child runs unchecked; the
# program exits with the child's status either way).
"$ehelf" check -- "$fixtures/check_fork" > "$work/out" 2>&1
rc=$?
"$ehelf" check --follow-fork -- "$fixtures/check_fork" > "$work/followed" 2>&1
rc2=$?
if [ $rc -eq 0 ] && grep -q "^0 inconsistencies; .* 1 thread$" "$work/out" && grep -q "exited with 2$" "$work/out" &&
    [ $rc2 -eq 1 ] && grep -q "check_fork: 0x[0-9a-f]* pops+0xc: ret$" "$work/followed" &&
    grep -q "^1 inconsistency; .* 2 threads in 2 processes$" "$work/followed" && grep -q "exited with 2$" "$work/followed"; then
  ok "--follow-fork: the child's inconsistency ($(grep -c . "$work/followed") lines), none without"
else
  bad "--follow-fork: rc=$rc rc2=$rc2"; cat "$work/out" "$work/followed"
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
expect_usage replay-and-follow "excludes" --replay "$work/pop.trace" --follow-fork
expect_usage replay-and-command "excludes" --replay "$work/pop.trace" -- "$fixtures/check_correct"
expect_usage tables-without-replay "requires --replay" --tables a=b -- "$fixtures/check_correct"
expect_usage tables-form "is not MODULE=ELF" --replay "$work/pop.trace" --tables nothing
expect_usage tables-unused "no module of the trace is libnothing.so" --replay "$work/pop.trace" \
  --tables "libnothing.so=$work/check_correct.synth"
expect_usage tables-no-cfi "no unwind tables" --replay "$work/pop.trace" --tables "check_pop_adjust=/etc/hostname"
expect_usage replay-missing "$work/none" --replay "$work/none"
head -c 40 "$work/pop.trace" > "$work/cut.trace"
expect_usage replay-truncated "cut.trace: offset 0x" --replay "$work/cut.trace"
printf 'EHELFTRC\x09\x00' > "$work/v9.trace"
expect_usage replay-version "trace version 9" --replay "$work/v9.trace"
expect_usage record-unwritable "cannot write" --record /nonexistent/dir/t -- "$fixtures/check_correct"
exit $fail
