#!/usr/bin/env bash
# `ehelf synth --patch` and gdb over synthesized tables. A C++ program that throws across frames
# (with destructors to run on the way) and calls glibc's backtrace() in its deepest frame, built
# by g++ and clang++ (PIE at -O0/-O2, non-PIE at -O2), is stripped of .eh_frame/.eh_frame_hdr with
# objcopy: it then aborts on the throw. After `ehelf synth --patch` it prints exactly what the
# original printed (the same backtrace() frames, the same unwinding and catch) and exits 0.
# gdb's `bt` at the deepest frame lists the same functions as on the original binary, both on the
# patched copy and on the stripped binary with the `-o` output added (`add-symbol-file OUT -o
# BASE`, .eh_frame and --debug-frame), or found as its debug file (--debug-frame, by build id
# under a debug-file-directory), where the stripped binary alone does not.
source "$(dirname "$0")/common.sh" "$@"
src=$2
prog="$src/tests/fixtures/synth_throw.cpp"
# Addresses and file names vary between the copies: compare the rest.
normalise() { sed -E 's/\[0x[0-9a-f]+\]//; s/^ *[^ (]*\(/  (/' "$1"; }

for cxx in g++ clang++; do
  command -v "$cxx" >/dev/null || { bad "$cxx not installed"; continue; }
  for flags in "-O2" "-O0" "-O2 -fno-pie -no-pie"; do
    name="$cxx ${flags}"
    bin="$work/throw-$cxx${flags// /}"
    "$cxx" $flags -rdynamic -o "$bin" "$prog" 2>/dev/null || { bad "$name: does not build"; continue; }
    "$bin" > "$bin.out" 2>&1 || { bad "$name: the original fails"; continue; }
    objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr "$bin" "$bin.stripped"
    if ("$bin.stripped" > "$bin.stripped.out" 2>&1) 2>/dev/null; then
      bad "$name: the stripped copy does not abort: the test would prove nothing"
    fi
    "$ehelf" synth "$bin.stripped" --patch "$bin.patched" --json > "$bin.json" ||
      { bad "$name: synth --patch failed"; continue; }
    if "$bin.patched" > "$bin.patched.out" 2>&1 &&
      diff <(normalise "$bin.out") <(normalise "$bin.patched.out") > "$bin.diff"; then
      ok "$name: patched copy runs as the original ($(grep -c '^  ' "$bin.out") backtrace() frames, $(grep -c unwound "$bin.out") destructors, caught); $(python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print(d["lsdas_matched"],"of",d["lsdas"],"LSDAs matched")' "$bin.json")"
    else
      bad "$name: patched copy differs"; cat "$bin.diff" "$bin.patched.out" | head -20
    fi
  done
done

# Split functions without symbols or tables (synth_cold.cpp, g++ -O2, strip -s then objcopy): the
# .cold parts, found from the jumps entering them, get their real start and their exception
# tables back, and the patched copy runs every destructor and catch as the original does.
if command -v g++ >/dev/null; then
  bin="$work/cold"
  g++ -std=c++14 -O2 -w -o "$bin" "$src/tests/fixtures/synth_cold.cpp" && "$bin" > "$bin.out" 2>&1 &&
    strip -s -o "$bin.s" "$bin" &&
    objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr "$bin.s" "$bin.stripped" ||
    bad "synth_cold: does not build or run"
  if ("$bin.stripped" > /dev/null 2>&1) 2>/dev/null; then
    bad "synth_cold: the stripped copy does not abort: the test would prove nothing"
  fi
  "$ehelf" synth "$bin.stripped" --patch "$bin.patched" > /dev/null ||
    bad "synth_cold: synth --patch failed"
  if "$bin.patched" > "$bin.patched.out" 2>&1 && cmp -s "$bin.out" "$bin.patched.out"; then
    ok "synth_cold without symbols: patched copy prints what the original prints ($(grep -c '^~' "$bin.out") destructors, $(grep -c '^failed' "$bin.out") caught)"
  else
    bad "synth_cold without symbols: patched copy differs"; diff "$bin.out" "$bin.patched.out" | head
  fi
fi

# .cold parts that open with gcc's `nop` before a landing pad (synth_cold_nop.cpp, g++ -O2 and
# -O3, strip then objcopy): their FDEs start at the `nop`, where their LSDAs count from, not
# at the first address a jump reaches, and the patched copy runs every destructor and catch as the
# original does (the build before this started them up to 9 bytes late without their LSDAs: 6
# of 10 matched, rethrown's cleanups never ran).
if command -v g++ >/dev/null; then
  for level in -O2 -O3; do
    bin="$work/cold_nop$level"
    g++ -std=c++20 $level -w -o "$bin" "$src/tests/fixtures/synth_cold_nop.cpp" && "$bin" > "$bin.out" 2>&1 &&
      strip -o "$bin.s" "$bin" &&
      objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr "$bin.s" "$bin.stripped" ||
      { bad "synth_cold_nop $level: does not build or run"; continue; }
    # The .cold parts that open with a nop, from the symbols of the original.
    nop_parts=$(objdump -d "$bin" | awk '/cold>:$/ { part = $1; next } part { if ($2 == "90" && NF == 3) print part; part = "" }')
    [ -n "$nop_parts" ] || { bad "synth_cold_nop $level: g++ put no nop first in a .cold part: the test would prove nothing"; continue; }
    "$ehelf" synth "$bin.stripped" --patch "$bin.patched" > /dev/null || { bad "synth_cold_nop $level: synth --patch failed"; continue; }
    starts=$(readelf -wF "$bin.patched" | sed -n 's/.* FDE cie=[0-9a-f]* pc=\([0-9a-f]*\)\.\..*/\1/p')
    missing=""
    for part in $nop_parts; do grep -qx "$part" <<< "$starts" || missing="$missing $part"; done
    [ -z "$missing" ] && ok "synth_cold_nop $level: the FDEs of the $(wc -w <<< "$nop_parts") .cold parts opening with a nop start there" ||
      bad "synth_cold_nop $level: no FDE starts at the nop of$missing"
    if "$bin.patched" > "$bin.patched.out" 2>&1 && cmp -s "$bin.out" "$bin.patched.out"; then
      ok "synth_cold_nop $level: patched copy prints what the original prints ($(grep -c '^~' "$bin.out") destructors, $(grep -c 'caught' "$bin.out") caught)"
    else
      bad "synth_cold_nop $level: patched copy differs"; diff "$bin.out" "$bin.patched.out" | head
    fi
  done
fi

# The patched file: a new PT_LOAD holding the program headers and the tables, PT_GNU_EH_FRAME on
# the new .eh_frame_hdr, tables readelf reads without a warning.
bin="$work/throw-g++-O2"
if [ -x "$bin.patched" ]; then
  segments=$(readelf -lW "$bin.patched")
  echo "$segments" | grep -q 'GNU_EH_FRAME' && [ "$(echo "$segments" | grep -c ' LOAD ')" = 5 ] &&
    ok "patched file: 5 PT_LOAD (one new), PT_GNU_EH_FRAME" || { bad "patched file's segments"; echo "$segments"; }
  warn=$(readelf -wF "$bin.patched" 2>&1 >/dev/null)
  [ -z "$warn" ] && ok "readelf -wF reads the patched file without warnings" || bad "readelf: $warn"
fi

# A file that cannot be patched (a relocatable object has no segment to extend): one line naming
# it, exit 2.
g++ -c -o "$work/throw.o" "$prog" 2>/dev/null
"$ehelf" synth "$work/throw.o" --patch "$work/throw.o.patched" > /dev/null 2> "$work/err"
status=$?
[ "$status" = 2 ] && [ "$(wc -l < "$work/err")" = 1 ] && grep -q "throw.o" "$work/err" &&
  ok "relocatable object: $(cat "$work/err")" || bad "relocatable object: exit $status: $(cat "$work/err")"

# gdb: bt at the deepest frame.
if command -v gdb >/dev/null; then
  bt() { # FILE [extra gdb commands...]: the function names of `bt` at print_backtrace
    local file=$1
    shift
    gdb -q -batch -ex 'set debuginfod enabled off' -ex 'break print_backtrace' -ex run "$@" -ex bt \
      "$file" 2>/dev/null | sed -nE 's/^#[0-9]+ +(0x[0-9a-f]+ in )?([^ ]+) .*/\2/p' | tr '\n' ' '
  }
  bin="$work/throw-g++-O2"
  expected=$(bt "$bin")
  [[ "$expected" == "print_backtrace deepest middle outer main "* ]] || bad "gdb bt on the original: $expected"
  patched=$(bt "$bin.patched")
  [ "$patched" = "$expected" ] && ok "gdb bt on the patched copy: $patched" ||
    bad "gdb bt on the patched copy: '$patched', original: '$expected'"
  stripped=$(bt "$bin.stripped")
  [ "$stripped" != "$expected" ] && ok "gdb bt on the stripped binary alone stops early: $stripped" ||
    bad "gdb bt on the stripped binary already matches: the test would prove nothing"
  "$ehelf" synth "$bin.stripped" -o "$bin.synth" > /dev/null || bad "synth -o failed"
  # Where the executable is mapped (gdb runs it without address randomization: the same each run).
  base=$(gdb -q -batch -ex 'set debuginfod enabled off' -ex 'break print_backtrace' -ex run \
    -ex 'info proc mappings' "$bin.stripped" 2>/dev/null |
    awk -v f="$bin.stripped" '$NF == f { print $1; exit }')
  added=$(bt "$bin.stripped" -ex "add-symbol-file $bin.synth -o $base")
  [ "$added" = "$expected" ] && ok "gdb bt on the stripped binary with add-symbol-file OUT -o $base: $added" ||
    bad "gdb bt with add-symbol-file: '$added', original: '$expected'"
  # The same with the table as .debug_frame (--debug-frame), added by hand, then found by gdb
  # itself as the stripped binary's separate debug file, by build id under a debug-file-directory
  # (gdb reads no .eh_frame from a separate debug file: there only the .debug_frame output serves).
  "$ehelf" synth "$bin.stripped" -o "$bin.synth-df" --debug-frame > /dev/null || bad "synth --debug-frame failed"
  added=$(bt "$bin.stripped" -ex "add-symbol-file $bin.synth-df -o $base")
  [ "$added" = "$expected" ] && ok "gdb bt with add-symbol-file OUT(--debug-frame) -o $base: $added" ||
    bad "gdb bt with add-symbol-file OUT(--debug-frame): '$added', original: '$expected'"
  id=$(build_id "$bin.stripped")
  mkdir -p "$work/debug/.build-id/${id:0:2}"
  cp "$bin.synth-df" "$work/debug/.build-id/${id:0:2}/${id:2}.debug"
  found=$(bt "$bin.stripped" -iex "set debug-file-directory $work/debug:/usr/lib/debug")
  [ -n "$id" ] && [ "$found" = "$expected" ] &&
    ok "gdb bt with OUT(--debug-frame) as DEBUGDIR/.build-id/${id:0:2}/${id:2}.debug: $found" ||
    bad "gdb bt with OUT(--debug-frame) in a debug-file-directory: '$found', original: '$expected'"
else
  bad "gdb not installed"
fi
exit $fail
