#!/usr/bin/env bash
# `ehelf check --replay` on crafted traces (check/trace.hpp's format, written here by python):
# - 100 module records naming the largest library here (libLLVM, else libstdc++) load its file
#   once: memory stays within what one copy of its table takes (before, each record loaded it
#   again: 20 records took 914 MB, 100 ended in bad_alloc). /usr/bin/time's maximum RSS, checked
#   against the RSS of a trace naming it once.
# - a module path holding a newline and a terminal escape is printed escaped, on one line;
# - a module image (the vDSO's record) that is not an ELF file is refused with an error naming
#   the trace file and the record's offset, not "[vdso]".
# Usage: test_replay_bounds.sh BUILD_DIR [SOURCE_DIR]
source "$(dirname "$0")/common.sh" "$@"
for tool in python3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "SKIP: needs $tool"; exit 77; }
done
lib=/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1
[ -f "$lib" ] || lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
[ -f "$lib" ] || { echo "SKIP: no large library"; exit 77; }
id=$(build_id "$lib")
cd "$work" || exit 1

# trace.py OUT [--image] PATH BUILD_ID COUNT: COUNT module records for PATH (with an image of
# garbage bytes with --image), then an end record without counters.
cat >trace.py <<'EOF'
import struct, sys
def uleb(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
args = sys.argv[1:]
image = b''
if args[1] == '--image':
    image = b'\x7fELF not really' * 8
    del args[1]
out, path, build_id, count = args[0], args[1].encode('utf-8', 'surrogateescape'), bytes.fromhex(args[2]), int(args[3])
data = bytearray(b'EHELFTRC' + struct.pack('<H', 1))
for i in range(count):
    data += b'\x01' + uleb(i) + uleb(len(path)) + path + uleb(len(build_id)) + build_id
    data += uleb(0x1000 * i) + uleb(len(image)) + image
data += b'\x06' + uleb(0)
open(out, 'wb').write(data)
EOF
rss() { # ARGS...: runs ehelf; its status in $rc, its maximum RSS in KB in $kb
  /usr/bin/time -f '%M' -o "$work/rss" timeout 300 "$ehelf" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  kb=$(tail -1 "$work/rss")
}
python3 trace.py once.trace "$lib" "$id" 1
python3 trace.py many.trace "$lib" "$id" 100
rss check --replay once.trace
once=$kb
[ $rc = 0 ] || bad "one record: status $rc: $(head -c 300 "$work/err")"
rss check --replay many.trace
many=$kb
echo "$lib: one record ${once} KB, 100 records ${many} KB ($(stat -c %s many.trace) bytes)"
if [ $rc != 0 ]; then
  bad "100 records: status $rc: $(head -c 300 "$work/err")"
elif [ "$many" -gt $((once * 3 / 2 + 16384)) ]; then
  bad "100 records of one file took ${many} KB where one took ${once} KB"
else
  ok "100 records of one file: ${many} KB (one: ${once} KB)"
fi

# A path with a newline and an escape sequence (no such file): one line, both escaped.
python3 trace.py hostile.trace $'/nonexistent/a\nb\x1b[31mc' "$id" 1
rss check --replay hostile.trace
if [ $rc = 0 ] || [ $rc -ge 124 ]; then
  bad "hostile path: status $rc"
elif [ "$(wc -l <"$work/err")" != 1 ] || grep -q $'\x1b' "$work/err" ||
    ! grep -qF '/nonexistent/a\x0ab\x1b[31mc' "$work/err"; then
  bad "hostile path: not one escaped line: $(cat -v "$work/err")"
else
  ok "hostile path: $(cat "$work/err")"
fi

# A module image that is not an ELF file: the trace and the record's offset (10: after the
# header) are named.
python3 trace.py image.trace --image '[vdso]' "$id" 1
rss check --replay image.trace
if [ $rc = 0 ] || [ $rc -ge 124 ]; then
  bad "bad image: status $rc"
elif ! grep -qE "^ehelf: check: image\.trace: offset 0xa: module image \[vdso\]: " "$work/err"; then
  bad "bad image: the trace and the offset are not named: $(cat -v "$work/err")"
else
  ok "bad image: $(cat "$work/err")"
fi

[ $fail = 0 ] && echo PASS
exit $fail
