#!/usr/bin/env bash
# What `ehelf synth -o` and `--patch` write is the synthesis `--compare-with` measures, on
# programs stripped of their symbols and tables (strip -s, then objcopy removing .eh_frame and
# .eh_frame_hdr, as scripts/synth-campaign.sh --no-symbols makes them): csmith programs (gcc -O0,
# -O0 -fomit-frame-pointer, -O2) and a fixture. Both outputs are byte-identical with and without
# --compare-with, and read back with readelf -wF they have a row at every instruction objdump
# lists that --compare-with analysed (as many as it counts), the compiler's CFA and return
# address at every one it compared, and rows for .init's and .fini's code (_init, _fini). (The
# build before this handed discovery the stripped file's own empty table: no prologue scan, 66
# FDEs written where --compare-with measured 114 functions, 5,508 of 9,023 instructions.)
source "$(dirname "$0")/common.sh" "$@"
src=$2

# STRIPPED ORIGINAL NAME: the checks above.
check_written() {
  local stripped=$1 original=$2 name=$3
  "$ehelf" synth "$stripped" --compare-with "$original" --json > "$stripped.json" ||
    { bad "$name: --compare-with disagrees or fails"; return; }
  "$ehelf" synth "$stripped" -o "$stripped.o1" --patch "$stripped.p1" > /dev/null &&
    "$ehelf" synth "$stripped" --compare-with "$original" -o "$stripped.o2" \
      --patch "$stripped.p2" > /dev/null ||
    { bad "$name: synth -o / --patch failed"; return; }
  cmp -s "$stripped.o1" "$stripped.o2" && cmp -s "$stripped.p1" "$stripped.p2" ||
    { bad "$name: -o or --patch output changes with --compare-with"; return; }
  local out
  for out in "$stripped.o1" "$stripped.p1"; do
    python3 "$src/tests/scripts/written_rows.py" "$out" "$original" "$stripped" > "$out.rows"
    python3 - "$out.rows" "$stripped.json" "$out" "$stripped" <<'PY' &&
import json, re, subprocess, sys
rows, measured = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
written, code = sys.argv[3], sys.argv[4]
assert measured["agreeing"] == measured["compared"] > 0, (measured["agreeing"], measured["compared"])
assert not rows["differ"], rows["differ"]
# Every analysed instruction has its row written; every one compared agrees there as written.
assert rows["covered"] == measured["instructions"], (rows["covered"], measured["instructions"])
assert rows["agreeing"] == measured["compared"], (rows["agreeing"], measured["compared"])
fdes = [(int(a, 16), int(b, 16)) for a, b in re.findall(
    r" FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
    subprocess.run(["readelf", "-wF", written], capture_output=True, text=True).stdout)]
for section in (".init", ".fini"):
    m = re.search(r"\s" + re.escape(section) + r"\s+PROGBITS\s+([0-9a-f]+)",
                  subprocess.run(["readelf", "-SW", code], capture_output=True, text=True).stdout)
    assert m, "no %s section" % section
    start = int(m.group(1), 16)
    assert any(a <= start < b for a, b in fdes), "%s (%#x) has no row" % (section, start)
PY
      ok "$name $(basename "$out" | sed 's/.*\.o1/-o/; s/.*\.p1/--patch/'): the same with --compare-with; $(python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));m=json.load(open(sys.argv[2]));print(r["covered"],"instructions written,",r["agreeing"],"agreeing with the compiler (of",r["compiler"],"it covers);",m["functions"],"functions")' "$out.rows" "$stripped.json")" ||
      bad "$name: $(basename "$out") does not hold what --compare-with measured"
  done
}

strip_all() { # PROGRAM: PROGRAM.stripped, without symbols or tables
  strip -s -o "$1.s" "$1" &&
    objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr "$1.s" "$1.stripped"
}

prog="$work/shapes"
gcc -O2 -o "$prog" "$src/tests/fixtures/synth_shapes.c" && strip_all "$prog" &&
  check_written "$prog.stripped" "$prog" "synth_shapes gcc -O2" || bad "synth_shapes: does not build"

# Jumps into the middle of an instruction (synth_misdecode.S): no row of the misdecoded path is
# written at a real instruction, and --compare checks each row written. Read back with readelf,
# the -o output has the assembler's CFA at every real instruction objdump lists, with the
# symbols and tables and without (the build before this wrote rsp+24 where the CFA is rsp+16 and
# rsp+32: 6 instructions, and --compare reported only the misdecoded address).
prog="$work/misdecode"
if gcc -o "$prog" "$src/tests/fixtures/synth_misdecode.S" && "$prog" && strip_all "$prog"; then
  "$ehelf" synth "$prog" --compare --json > "$prog.json" && "$ehelf" synth "$prog" -o "$prog.out" > /dev/null &&
    python3 "$src/tests/scripts/written_rows.py" "$prog.out" "$prog" "$prog" > "$prog.rows" &&
    python3 - "$prog.rows" "$prog.json" <<'PY' &&
import json, sys
rows, measured = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert not rows["differ"], rows["differ"]
assert rows["agreeing"] == rows["compiler"] >= 40, (rows["agreeing"], rows["compiler"])
assert measured["conflicts"] == 0 and measured["agreeing"] == measured["compared"], measured["disagreements"]
PY
    ok "synth_misdecode: $(python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));print(r["agreeing"],"of",r["compiler"],"real instructions written with the assembler'"'"'s CFA")' "$prog.rows")" ||
    bad "synth_misdecode: a misdecoded path's row at a real instruction"
  check_written "$prog.stripped" "$prog" "synth_misdecode without symbols or tables"
else
  bad "synth_misdecode: does not build or run"
fi

# A function with a row DWARF cannot express (synth_odd_save.S: rbx saved at CFA-20): -o and
# --patch leave out its rows with one warning naming it, write the others' (readelf reads the
# assembler's CFA back at every instruction its table covers) and exit 0; the patched copy runs
# (the build before this refused both outputs, exit 2).
prog="$work/odd_save"
if gcc -o "$prog" "$src/tests/fixtures/synth_odd_save.S" && "$prog"; then
  "$ehelf" synth "$prog" -o "$prog.out" --patch "$prog.patched" > /dev/null 2> "$prog.err"
  status=$?
  odd=$(nm "$prog" | awk '$3 == "odd_save" { print $1 }')
  if [ "$status" = 0 ] && [ "$(wc -l < "$prog.err")" = 1 ] &&
    grep -q "warning: .*odd_save: cannot encode the row at .*: a save offset not a multiple of 8" "$prog.err" &&
    "$prog.patched" && python3 "$src/tests/scripts/written_rows.py" "$prog.out" "$prog" "$prog" > "$prog.rows" &&
    python3 - "$prog.rows" "$prog.out" "$odd" <<'PY'
import json, re, subprocess, sys
rows = json.load(open(sys.argv[1]))
assert not rows["differ"] and rows["agreeing"] == rows["compiler"] >= 10, rows
odd = int(sys.argv[3], 16)
fdes = re.findall(r" FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                  subprocess.run(["readelf", "-wF", sys.argv[2]], capture_output=True, text=True).stdout)
assert len(fdes) > 5, fdes
assert not any(int(a, 16) <= odd < int(b, 16) for a, b in fdes), "odd_save has an FDE"
PY
  then
    ok "synth_odd_save: $(cat "$prog.err"); the other $(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["agreeing"])' "$prog.rows") instructions written as the assembler's; the patched copy runs"
  else
    bad "synth_odd_save: exit $status: $(cat "$prog.err")"
  fi
else
  bad "synth_odd_save: does not build or run"
fi

csmith_include=$(dirname "$(find /usr/include -name csmith.h -print -quit 2>/dev/null)")
if command -v csmith >/dev/null && [ -n "$csmith_include" ]; then
  csmith --seed 7 > "$work/p7.c"
  for flags in "-O0" "-O0 -fomit-frame-pointer" "-O2"; do
    prog="$work/p7${flags// /}"
    gcc $flags -w -I"$csmith_include" -o "$prog" "$work/p7.c" && strip_all "$prog" &&
      check_written "$prog.stripped" "$prog" "csmith seed 7, gcc $flags" ||
      bad "csmith seed 7, gcc $flags: does not build"
  done
else
  echo "csmith not installed (scripts/setup.sh): the csmith programs are skipped"
fi
exit $fail
