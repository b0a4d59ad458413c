#!/usr/bin/env python3
"""What a synthesized table written by `ehelf synth -o` holds, read back by readelf, against the
compiler's table and objdump's instructions.

Usage: written_rows.py WRITTEN ORIGINAL CODE
  WRITTEN   the -o output (or a --patch output)
  ORIGINAL  the program with its compiler's tables
  CODE      the program whose instructions objdump -d lists (the stripped copy)
Prints one JSON object: "covered" (instructions WRITTEN has a row for), "agreeing" (of those,
the ones where ORIGINAL has a row and both give the same CFA and return address rule, or both
an undefined return address), "differ"
(the first few that do not), "without_original" (covered, ORIGINAL has no row), "compiler"
(instructions ORIGINAL has a row for). Instructions: objdump -d's outside the PLT.
"""
import bisect
import json
import re
import subprocess
import sys


def rows(path):
    """readelf -wF's rows: a sorted list of (pc, end of its FDE, {column: rule}). An FDE without
    instructions (readelf prints no row for it) has its CIE's initial row."""
    out = subprocess.run(["readelf", "-wF", path], capture_output=True, text=True).stdout
    result, header, fde_end, cie_rows, cie = [], [], None, {}, None
    for line in out.splitlines():
        m = re.search(r" FDE cie=(\S+) pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
        if m:
            fde_end, cie = int(m.group(3), 16), None
            result.append((int(m.group(2), 16), fde_end, cie_rows.get(int(m.group(1), 16), {})))
            continue
        m = re.match(r"([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE", line)
        if m:
            fde_end, cie = None, int(m.group(1), 16)
            continue
        w = line.split()
        if w and w[0] == "LOC":
            header = w
        elif w and len(w) == len(header) and re.fullmatch("[0-9a-f]{16}", w[0]):
            row = dict(zip(header[1:], w[1:]))
            if cie is not None:
                cie_rows.setdefault(cie, row)
            elif fde_end is not None:
                if result and result[-1][0] == int(w[0], 16):
                    result.pop()  # the FDE's first row replaces the CIE's
                result.append((int(w[0], 16), fde_end, row))
    result.sort(key=lambda r: r[0])
    return result


def row_at(table, starts, pc):
    i = bisect.bisect_right(starts, pc) - 1
    if i < 0 or pc >= table[i][1]:
        return None
    return table[i][2]


def instructions(path):
    """objdump's instructions outside the PLT sections (not analysed: their rows are standard)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True,
                         text=True).stdout
    result, in_plt = [], False
    for line in out.splitlines():
        if line.startswith("Disassembly of section "):
            in_plt = line.split()[-1].startswith(".plt")
            continue
        m = re.match(r"\s+([0-9a-f]+):\s+(\S+)", line)
        if m and not in_plt:
            result.append(int(m.group(1), 16))
    return result


def main():
    written, original, code = sys.argv[1:4]
    w, o = rows(written), rows(original)
    ws, os_ = [r[0] for r in w], [r[0] for r in o]
    covered = agreeing = without = compiler = 0
    differ = []
    for pc in instructions(code):
        ours = row_at(w, ws, pc)
        compiler += row_at(o, os_, pc) is not None
        if ours is None:
            continue
        covered += 1
        theirs = row_at(o, os_, pc)
        if theirs is None:
            without += 1
            continue
        # The entry point's row says it has no caller: its CFA does not matter then.
        outermost = ours.get("ra") == theirs.get("ra") == "u"
        if outermost or (ours.get("CFA"), ours.get("ra")) == (theirs.get("CFA"), theirs.get("ra")):
            agreeing += 1
        elif len(differ) < 5:
            differ.append("%#x: written %s ra=%s, compiler %s ra=%s" %
                          (pc, ours.get("CFA"), ours.get("ra"), theirs.get("CFA"),
                           theirs.get("ra")))
    print(json.dumps({"covered": covered, "agreeing": agreeing, "differ": differ,
                      "without_original": without, "compiler": compiler}))


main()
