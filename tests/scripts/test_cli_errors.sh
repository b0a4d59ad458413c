#!/usr/bin/env bash
# Bad input to the CLI: each case must print one line on stderr naming the file (and offset where
# there is one), exit non-zero, and never crash (the sanitizer build aborts on any memory error).
set -uo pipefail
build=$1
ehelf="$build/bin/ehelf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

expect_error() { # name, expected text, command...
  local name=$1 want=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ $rc -eq 0 ] || [ $rc -ge 128 ] || ! grep -q -- "$want" "$work/err" || [ "$lines" -ne 1 ]; then
    echo "FAIL $name: rc=$rc, stderr ($lines lines):"; cat "$work/err"; fail=1
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

# A malformed call-frame table: the text dump prints what readelf -wF prints, says what is wrong
# on stderr (file, section, offset) and exits 1 (readelf exits 0).
expect_readelf_warning() { # name, expected text, file
  local name=$1 want=$2 file=$3
  readelf -wF "$file" >"$work/rout" 2>/dev/null
  "$ehelf" dump "$file" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -ne 1 ] || ! cmp -s "$work/out" "$work/rout" || ! grep -q -- "$want" "$work/err"; then
    echo "FAIL $name: rc=$rc, stderr:"; cat "$work/err"; fail=1
  else
    echo "ok   $name: $(head -1 "$work/err")"
  fi
}

printf 'hello world, not an ELF file\n' >"$work/text"
expect_error not-elf "$work/text: not an ELF file" "$ehelf" dump "$work/text"
expect_error missing "No such file\|does not exist" "$ehelf" dump "$work/nothing"
head -c 40 /usr/lib/x86_64-linux-gnu/libc.so.6 >"$work/short"
expect_error truncated-header "truncated ELF header" "$ehelf" dump "$work/short"
python3 - "$work" <<'PY'
import sys, shutil
w = sys.argv[1]
b = bytearray(open('/usr/lib/x86_64-linux-gnu/libc.so.6', 'rb').read())
# 32-bit class byte.
c = bytearray(b); c[4] = 1; open(w + '/elf32', 'wb').write(c)
# .eh_frame: the first CIE's length made huge (find the section via the section headers).
import struct
shoff = struct.unpack_from('<Q', b, 0x28)[0]; shnum = struct.unpack_from('<H', b, 0x3c)[0]
shstrndx = struct.unpack_from('<H', b, 0x3e)[0]
def sh(i): return struct.unpack_from('<IIQQQQIIQQ', b, shoff + 64 * i)
stroff = sh(shstrndx)[4]
for i in range(shnum):
    h = sh(i)
    name = b[stroff + h[0]: b.index(0, stroff + h[0])].decode()
    if name == '.eh_frame':
        d = bytearray(b); struct.pack_into('<I', d, h[4] + 0x18, 0x7ffffff0)
        open(w + '/bad_length', 'wb').write(d)
        d = bytearray(b); struct.pack_into('<I', d, h[4] + 0x18 + 4, 0x7fff0000)
        open(w + '/bad_cie_pointer', 'wb').write(d)
        d = bytearray(b[:h[4] + 0x30]); open(w + '/cut_in_eh_frame', 'wb').write(d)
PY
expect_error elf32 "32-bit ELF is not supported" "$ehelf" dump "$work/elf32"
expect_readelf_warning bad-length "bad_length: .eh_frame+0x18: Invalid length 0x7ffffff0" "$work/bad_length"
expect_readelf_warning bad-cie-pointer "bad_cie_pointer: .eh_frame+0x18: CIE pointer" "$work/bad_cie_pointer"
expect_readelf_warning cut-file "cut_in_eh_frame: offset 0x[0-9a-f]*: section headers extend past" "$work/cut_in_eh_frame"
expect_error bad-json "bad_length: .eh_frame+0x18" "$ehelf" dump --json "$work/bad_length"
expect_error bad-flag "unknown\|not expected\|The following argument" "$ehelf" dump --no-such-flag /usr/lib/x86_64-linux-gnu/libc.so.6
expect_error no-command "a command is required: dump, stats, compile, stack, perf" "$ehelf"
expect_error stats-not-elf "no ELF64 x86_64 file with call-frame tables among 1 file (1 not ELF" "$ehelf" stats "$work/text"
expect_error stats-elf32 "among 1 file (0 not ELF, 1 32-bit" "$ehelf" stats "$work/elf32"
expect_error unknown-command "unknown command 'bogus' (commands: dump, stats, compile" "$ehelf" bogus
expect_error unknown-flag-first "unknown option '--bogus' (a command comes first: dump" "$ehelf" --bogus

# A file with no tables is not an error: readelf prints nothing, we say so on stderr.
cc -O2 -fno-asynchronous-unwind-tables -fno-unwind-tables -nostdlib -static -x c - -o "$work/bare" <<'C'
void _start(void) { for (;;) {} }
C
"$ehelf" dump "$work/bare" >"$work/out" 2>"$work/err" || { echo "FAIL bare: non-zero exit"; fail=1; }
grep -q "no .eh_frame or .debug_frame" "$work/err" || { echo "FAIL bare: no message"; fail=1; }
[ -s "$work/out" ] && { echo "FAIL bare: printed something on stdout"; fail=1; }
exit $fail
