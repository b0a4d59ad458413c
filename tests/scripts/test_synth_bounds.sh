#!/usr/bin/env bash
# What `ehelf synth` may cost, on generated programs kept small: a function of 1 MB of `nop`s
# is synthesized under a 400 MB address-space limit (the build before this needed 526 MB of
# memory, 690 bytes an instruction); one with more instructions than the synthesizer's bound
# (2.2 million `nop`s) is refused with one line naming the file, exit 2, no crash; a chain of
# 5,000 functions each calling the next, the last one abort(), is found noreturn to its head (its
# `add; ret` after the call gets no row, as in no execution), within a time limit (the build
# before this stopped after 64 x 64 rounds, each re-sorting every instruction).
source "$(dirname "$0")/common.sh" "$@"
# A sanitized build reserves terabytes of address space: no address-space limit can hold it.
limit() { # KB COMMAND...: COMMAND under `ulimit -v KB` (without it in a sanitized build)
  local kb=$1
  shift
  if [ "$sanitized" = 1 ]; then "$@"; else (ulimit -v "$kb" && "$@"); fi
}
[ "$sanitized" = 1 ] && echo "SKIP the address-space limits: a sanitized build (the rest runs without them)"

# NAME COUNT: a program whose main runs COUNT nops, then returns 0.
nop_program() {
  cat > "$work/$1.S" <<EOF
        .text
        .globl main
        .type main, @function
main:
        .fill $2, 1, 0x90
        xorl %eax, %eax
        ret
        .size main, .-main
        .section .note.GNU-stack,"",@progbits
EOF
  gcc -o "$work/$1" "$work/$1.S"
}

if nop_program nops 1000000; then
  limit 400000 timeout 120 "$ehelf" synth "$work/nops" -o "$work/nops.out" --json > "$work/nops.json"
  status=$?
  if [ "$status" = 0 ] && python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));assert d["instructions"]>1000000,d["instructions"]' "$work/nops.json" &&
    grep -q "FDE" <<<"$(readelf -wF "$work/nops.out")"; then
    ok "1 MB of nops: synthesized$([ "$sanitized" = 1 ] || echo " under ulimit -v 400000") ($(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["instructions"])' "$work/nops.json") instructions)"
  else
    bad "1 MB of nops under ulimit -v 400000: exit $status"
  fi
else
  bad "nops: does not build"
fi

if nop_program many_nops 2200000; then
  limit 800000 timeout 120 "$ehelf" synth "$work/many_nops" -o "$work/many_nops.out" > /dev/null 2> "$work/err"
  status=$?
  [ "$status" = 2 ] && [ "$(wc -l < "$work/err")" = 1 ] && grep -q "many_nops: .*more than .* instructions to analyse" "$work/err" &&
    [ ! -e "$work/many_nops.out" ] && ok "2.2 million nops: $(cat "$work/err")" ||
    bad "2.2 million nops: exit $status: $(head -3 "$work/err")"
else
  bad "many_nops: does not build"
fi

# f0 calls f1, ..., f4999 calls abort: each fN is `sub $8,%rsp; call fN+1; add $8,%rsp; ret`,
# the `add; ret` reached only if the call returns.
python3 - "$work/chain.S" <<'PY'
import sys
n = 5000
with open(sys.argv[1], "w") as out:
    out.write("        .text\n")
    for i in range(n):
        callee = "f%d" % (i + 1) if i + 1 < n else "abort@PLT"
        out.write("        .globl f%d\n        .type f%d, @function\nf%d:\n" % (i, i, i))
        out.write("        subq $8, %%rsp\n        call %s\n.Lafter%d:\n" % (callee, i))
        out.write("        addq $8, %rsp\n        ret\n")
        out.write("        .size f%d, .-f%d\n" % (i, i))
    out.write("        .globl main\n        .type main, @function\nmain:\n")
    out.write("        subq $8, %rsp\n        cmpl $100, %edi\n        jle 1f\n        call f0\n")
    out.write("1:      xorl %eax, %eax\n        addq $8, %rsp\n        ret\n        .size main, .-main\n")
    out.write('        .section .note.GNU-stack,"",@progbits\n')
PY
if gcc -o "$work/chain" "$work/chain.S" && "$work/chain"; then
  timeout 120 "$ehelf" synth "$work/chain" -o "$work/chain.out" > /dev/null
  status=$?
  # The `add` after f0's call: the first instruction past it (objdump), a row nowhere.
  after=$(objdump -d --no-show-raw-insn "$work/chain" | awk '/<f0>:/ { f = 1; next } f && /call/ { c = 1; next } c { sub(":", "", $1); print $1; exit }')
  if [ "$status" = 0 ] && [ -n "$after" ] && python3 - "$work/chain.out" "$after" <<'PY'
import re, subprocess, sys
after = int(sys.argv[2], 16)
fdes = [(int(a, 16), int(b, 16)) for a, b in re.findall(
    r" FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
    subprocess.run(["readelf", "-wF", sys.argv[1]], capture_output=True, text=True).stdout)]
assert len(fdes) > 5000, len(fdes)
assert not any(a <= after < b for a, b in fdes), "f0's add after its call has a row"
PY
  then
    ok "a noreturn chain of 5,000 functions: found to its head (no row after f0's call at 0x$after)"
  else
    bad "a noreturn chain of 5,000 functions: exit $status"
  fi
else
  bad "chain: does not build or run"
fi
exit $fail
