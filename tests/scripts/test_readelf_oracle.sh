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
readelf -SW "$work/rec_debug_frame" | grep -q '\.debug_frame'
readelf -SW "$work/rec_debug_frame_zlib" | grep '\.debug_frame' | grep -q ' C '
"$ehelf" dump "$work/rec_debug_frame" | grep -q 'Contents of the .debug_frame section'

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
