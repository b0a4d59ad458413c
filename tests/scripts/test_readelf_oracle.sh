#!/usr/bin/env bash
# `ehelf dump` must print exactly what `readelf -wF` prints: on fixtures compiled here in many
# flavours (.eh_frame, .debug_frame, compressed .debug_frame, relocatable objects, C++ EH,
# hand-written CFI) and on a sample of this machine's libraries and programs.
set -euo pipefail
build=$1
src=$2
ehelf="$build/bin/ehelf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fx="$src/tests/fixtures"
cc=${CC:-cc}
cxx=${CXX:-c++}

"$cc" -O2 -fomit-frame-pointer "$fx/recursion.c" -o "$work/rec_o2"
"$cc" -O0 "$fx/recursion.c" -o "$work/rec_o0"
"$cc" -O2 -fno-omit-frame-pointer -no-pie "$fx/recursion.c" -o "$work/rec_fp_nopie"
"$cc" -O2 -static "$fx/recursion.c" -o "$work/rec_static"
"$cc" -O2 -g -fno-asynchronous-unwind-tables "$fx/recursion.c" -o "$work/rec_debug_frame"
"$cc" -O2 -g -fno-asynchronous-unwind-tables -gz=zlib "$fx/recursion.c" -o "$work/rec_debug_frame_zlib"
"$cc" -O2 -c "$fx/recursion.c" -o "$work/rec.o"
"$cc" -O2 -g -fno-asynchronous-unwind-tables -c "$fx/recursion.c" -o "$work/rec_debug_frame.o"
"$cxx" -O2 "$fx/exceptions.cpp" -o "$work/exceptions"
"$cxx" -O0 -c "$fx/exceptions.cpp" -o "$work/exceptions.o"
"$cc" -nostartfiles -static -nostdlib "$fx/cfi_variety.S" -o "$work/cfi_variety"
"$cc" -c "$fx/cfi_variety.S" -o "$work/cfi_variety.o"
if objcopy --compress-debug-sections=zstd "$work/rec_debug_frame" "$work/rec_debug_frame_zstd" 2>/dev/null; then
  :
fi

# The .debug_frame flavours must really have one (else the comparison would prove nothing).
grep -q '\.debug_frame' <<<"$(readelf -SW "$work/rec_debug_frame")"
grep '\.debug_frame' <<<"$(readelf -SW "$work/rec_debug_frame_zlib")" | grep -q ' C '
grep -q 'Contents of the .debug_frame section' <<<"$("$ehelf" dump "$work/rec_debug_frame")"

ls "$work"/* > "$work/list"
for f in /usr/lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
         /usr/lib/x86_64-linux-gnu/libm.so.6 /usr/lib/x86_64-linux-gnu/libz.so.1 \
         /lib64/ld-linux-x86-64.so.2 /usr/bin/bash /usr/bin/ls /usr/bin/readelf; do
  [ -f "$f" ] && readlink -f "$f" >> "$work/list"
done
# A fixed, spread-out sample of everything else: every 40th ELF candidate.
find /usr/bin /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -name '*.so*' -o -maxdepth 1 -type f -perm -u+x \
  2>/dev/null | sort | awk 'NR % 40 == 0' >> "$work/list"
sort -u "$work/list" | python3 -c '
import sys
for p in sys.stdin.read().split():
    try:
        h = open(p, "rb").read(20)
    except OSError:
        continue
    if h[:4] == b"\x7fELF" and h[4] == 2 and h[18:20] == b"\x3e\x00":
        print(p)' > "$work/elfs"
echo "comparing $(wc -l < "$work/elfs") files"
bash "$src/scripts/compare-readelf.sh" --ehelf "$ehelf" --list "$work/elfs"

# Static libraries: each member under "File: ARCHIVE(MEMBER)" as readelf prints it, byte for byte
# (long member names, a member that is not ELF: said on stderr and exit 1, as readelf's), an
# archive among other files; the machine's libc_nonshared.a and libstdc++.a; a thin archive
# (members that are files elsewhere) is refused in one line.
cd "$work"
cp rec.o a_member_name_longer_than_fifteen_bytes.o
printf 'not an object\n' > notes.txt
ar rc objects.a rec.o exceptions.o cfi_variety.o a_member_name_longer_than_fifteen_bytes.o
ar rc mixed.a rec.o notes.txt rec_debug_frame.o
ar rcT thin.a rec.o
libstdcxx=$("$cc" -print-file-name=libstdc++.a)
failed=0
for args in objects.a mixed.a "objects.a rec.o" /usr/lib/x86_64-linux-gnu/libc_nonshared.a "$libstdcxx"; do
  [ -e "${args%% *}" ] || continue
  set +e
  # shellcheck disable=SC2086
  "$ehelf" dump $args > ours 2> ours.err; ours_rc=$?
  # shellcheck disable=SC2086
  readelf -wF $args > theirs 2> /dev/null; theirs_rc=$?
  set -e
  members=$(grep -c '^File: .*(' theirs || true)
  if cmp -s ours theirs && [ $((ours_rc != 0)) -eq $((theirs_rc != 0)) ] && [ "$members" -ge 2 ]; then
    echo "ok   archive $args: $members members as readelf prints them (exit $ours_rc)"
  else
    echo "FAIL archive $args: exit $ours_rc (readelf $theirs_rc)"; diff ours theirs | head; cat ours.err
    failed=1
  fi
done
grep -q "mixed.a(notes.txt): not an ELF file" <("$ehelf" dump mixed.a 2>&1 >/dev/null) || {
  echo "FAIL mixed.a: the non-ELF member is not named"; failed=1; }
# A truncated archive: the members before the cut, then one line saying where and why, exit 1.
head -c $(($(stat -c %s objects.a) - 100)) objects.a > cut.a
if "$ehelf" dump cut.a > cut.out 2> cut.err || [ "$(grep -c '^File: cut.a(' cut.out)" -ne 3 ] ||
    ! grep -q "^ehelf: cut.a: offset 0x[0-9a-f]*: member of [0-9]* bytes runs past the end of the archive" cut.err; then
  echo "FAIL truncated archive: $(cat cut.err)"; failed=1
else
  echo "ok   truncated archive: 3 members, then $(cat cut.err)"
fi
if "$ehelf" dump thin.a > /dev/null 2> thin.err || ! grep -q "thin.a: a thin archive" thin.err ||
    [ "$(wc -l < thin.err)" -ne 1 ]; then
  echo "FAIL thin archive: $(cat thin.err)"; failed=1
else
  echo "ok   thin archive refused: $(cat thin.err)"
fi
exit $failed
