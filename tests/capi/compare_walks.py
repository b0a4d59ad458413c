#!/usr/bin/env python3
"""Compares the output of a libunwind-using test program built against the real libunwind
(EXPECTED) and against ehelf's (ACTUAL), line by line.

Frame lines look like
    WALK qsort #3 ip=libc.so.6+0x3fbf4 sp=+0xd10 name=msort+0x2b4 start=libc.so.6+0x3f960 sig=0
Every field must be equal, except the name in two cases:

  * where ehelf finds no symbol containing the pc it reports "?", while libunwind names the
    nearest preceding function symbol whatever its size. That is accepted only if the symbol
    libunwind named really does not contain the pc: its size (from nm, in the module's file;
    paths come from `ldd BINARY`) is at most the offset libunwind printed.
  * a module without .symtab (a stripped library, e.g. libc) whose separate debug file is
    installed (libc6-dbg): libunwind names from the module's .dynsym only, ehelf as eu-stack and
    gdb do, from the debug file's .symtab (static functions such as msort_with_tmp.part.0, or
    another alias: __qsort_r for qsort_r, raise for gsignal). That is accepted only if the
    module has no .symtab and ehelf's name is a symbol of the debug file (found by build-id,
    read with nm) that contains the pc, at exactly the offset ehelf printed (a symbol without a
    size, as the signal trampoline __restore_rt, only at its own address), named without its
    version as libunwind names versioned symbols (__libc_start_main, not
    __libc_start_main@@GLIBC_2.34).

Usage: compare_walks.py EXPECTED ACTUAL BINARY
"""
import os
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


def load_base(path):
    """The lowest PT_LOAD address, page-aligned: where dladdr's dli_fbase points, at bias 0."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
    addrs = [int(line.split()[2], 16) for line in out.splitlines()
             if line.split()[:1] == ["LOAD"]]
    return min(addrs) & ~0xfff if addrs else 0


def has_symtab(path):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    return re.search(r"\] \.symtab\s", out) is not None


def debug_file(path):
    """The separate debug file of `path` under /usr/lib/debug/.build-id, or None."""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]{3,})", out)
    if not m:
        return None
    candidate = f"/usr/lib/debug/.build-id/{m.group(1)[:2]}/{m.group(1)[2:]}.debug"
    return candidate if os.path.exists(candidate) else None


_debug_symbols = {}


def debug_symbols(path):
    """(value, size) of each function symbol of the debug file's .symtab, by name."""
    if path not in _debug_symbols:
        table = {}
        out = subprocess.run(["nm", "--defined-only", "-S", path], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:  # no size: a label such as __restore_rt, named at its address
                parts = [parts[0], "0", parts[1], parts[2]]
            if len(parts) == 4 and parts[2] in "tTwWi":
                # A versioned definition (__libc_start_main@@GLIBC_2.34) is named without its
                # version, as libunwind and dladdr name it.
                table.setdefault(parts[3].split("@")[0], []).append(
                    (int(parts[0], 16), int(parts[1], 16)))
        _debug_symbols[path] = table
    return _debug_symbols[path]


def named_from_debug_file(path, ip_offset, name, offset):
    """True if `path` has no .symtab and its debug file's symbol `name` contains the pc at
    `ip_offset` (from the module's base), `offset` bytes in (a return address may be one past the
    end: its call is what was looked up)."""
    if not path or has_symtab(path):
        return False
    dbg = debug_file(path)
    if not dbg:
        return False
    pc = load_base(path) + ip_offset
    return any(value + offset == pc and pc <= value + size
               for value, size in debug_symbols(dbg).get(name, []))


def main():
    expected_path, actual_path, binary = sys.argv[1:4]
    expected = open(expected_path).read().splitlines()
    actual = open(actual_path).read().splitlines()
    paths = module_paths(binary)
    problems = []
    unnamed = 0
    from_debug = 0
    if len(expected) != len(actual):
        problems.append(f"{len(expected)} lines expected, {len(actual)} produced")
    for want, got in zip(expected, actual):
        if want == got:
            continue
        w, g = FRAME.match(want), FRAME.match(got)
        same_but_name = w and g and all(
            w.group(k) == g.group(k) for k in ("head", "ip", "sp", "start", "sig"))
        if same_but_name:
            module, ip_offset = w.group("ip").split("+")
            path = paths.get(module)
            if g.group("name") == "?":
                sizes = symbol_sizes(path or module, w.group("name"))
                if sizes and all(size <= int(w.group("off"), 16) for size in sizes):
                    unnamed += 1
                    continue
            elif named_from_debug_file(path, int(ip_offset, 16), g.group("name"),
                                       int(g.group("off"), 16)):
                from_debug += 1
                continue
        problems.append(f"expected: {want}\n     got: {got}")
    print(f"{actual_path}: {len(actual)} lines; {unnamed} pcs outside any symbol, which libunwind "
          f"names after the preceding one; {from_debug} named from a separate debug file, where "
          f"libunwind takes the nearest .dynsym symbol")
    for p in problems:
        print("MISMATCH " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
