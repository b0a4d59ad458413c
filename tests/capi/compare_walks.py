#!/usr/bin/env python3
"""Compares the output of a libunwind-using test program built against the real libunwind
(EXPECTED) and against ehelf's (ACTUAL), line by line.

Frame lines look like
    WALK qsort #3 ip=libc.so.6+0x3fbf4 sp=+0xd10 name=msort+0x2b4 start=libc.so.6+0x3f960 sig=0
Every field must be equal, except one: where ehelf finds no symbol containing the pc it reports
"?", while libunwind names the nearest preceding function symbol whatever its size. That is
accepted only if the symbol libunwind named really does not contain the pc: its size (from nm, in
the module's file; paths come from `ldd BINARY`) is at most the offset libunwind printed.

Usage: compare_walks.py EXPECTED ACTUAL BINARY
"""
import re
import subprocess
import sys

FRAME = re.compile(r"^(?P<head>.* #\d+) ip=(?P<ip>\S+) sp=(?P<sp>\S+) name=(?P<name>.*)"
                   r"\+(?P<off>0x[0-9a-f]+|0) start=(?P<start>\S+) sig=(?P<sig>\d+)$")


def module_paths(binary):
    paths = {"main": binary}
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            paths[m.group(1)] = m.group(2)
        m = re.match(r"\s*(/\S+) \(", line)
        if m:
            paths[m.group(1).rsplit("/", 1)[-1]] = m.group(1)
    return paths


_sizes = {}


def symbol_sizes(path, name):
    if path not in _sizes:
        table = {}
        for flags in (["-S"], ["-D", "-S"]):
            out = subprocess.run(["nm", "--defined-only", *flags, path], capture_output=True,
                                 text=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 4:
                    table.setdefault(parts[3].split("@")[0], []).append(int(parts[1], 16))
        _sizes[path] = table
    return _sizes[path].get(name, [])


def main():
    expected_path, actual_path, binary = sys.argv[1:4]
    expected = open(expected_path).read().splitlines()
    actual = open(actual_path).read().splitlines()
    paths = module_paths(binary)
    problems = []
    unnamed = 0
    if len(expected) != len(actual):
        problems.append(f"{len(expected)} lines expected, {len(actual)} produced")
    for want, got in zip(expected, actual):
        if want == got:
            continue
        w, g = FRAME.match(want), FRAME.match(got)
        same_but_name = w and g and all(
            w.group(k) == g.group(k) for k in ("head", "ip", "sp", "start", "sig"))
        if same_but_name and g.group("name") == "?":
            module = w.group("ip").split("+")[0]
            sizes = symbol_sizes(paths.get(module, module), w.group("name"))
            if sizes and all(size <= int(w.group("off"), 16) for size in sizes):
                unnamed += 1
                continue
        problems.append(f"expected: {want}\n     got: {got}")
    print(f"{actual_path}: {len(actual)} lines; {unnamed} pcs outside any symbol, which libunwind "
          f"names after the preceding one")
    for p in problems:
        print("MISMATCH " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
