#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for N seconds (default 30)
# on a copy of its checked-in seed corpus. Exits non-zero on any crash, leak or timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh
seconds=${1:-30}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEHELF_SANITIZE=ON -DEHELF_FUZZ=ON -DEHELF_TESTS=OFF -DEHELF_BENCH=OFF >/dev/null
cmake --build build-fuzz -j2 --target $(cd fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//') >/dev/null
# perf.data seeds for fuzz_perf, made here rather than committed: two synthetic ones (file and
# pipe layout: comm, mmap2, fork, a sample with registers and a stack copy, exit), and when perf
# can record here, recordings of the recursion fixture in the file, pipe and compressed (-z)
# layouts (short run, 1 KB stack copies: each well under 200 KB). The fixture stays in place
# while fuzzing, so that the unwinder finds the files the recordings map.
perf_dir=$(mktemp -d)
trap 'rm -rf "$perf_dir"' EXIT
perf_seeds() { # DIR
  python3 - "$1" <<'PY'
import struct, sys
out = sys.argv[1]
st = 1 | 2 | 4 | 256 | 32 | 4096 | 8192  # IP TID TIME PERIOD CALLCHAIN REGS_USER STACK_USER
regs = (1 << 1) | (1 << 6) | (1 << 7) | (1 << 8)  # bx bp sp ip
attr = struct.pack('<IIQQQQQIIQQQQIiQIHH', 1, 112, 0, 4000, st, 0, (1 << 10) | (1 << 18),
                   0, 0, 0, 0, 0, regs, 64, 0, 0, 0, 0, 0)
def rec(t, misc, body): return struct.pack('<IHH', t, misc, 8 + len(body)) + body
def cstr(s):
    b = s.encode() + b'\0'
    return b + b'\0' * (-len(b) % 8)
def tr(pid, tid, time): return struct.pack('<IIQ', pid, tid, time)
ip, sp = 0x401010, 0x7ffd0000
stack = struct.pack('<QQQQ', 0x401100, sp + 16, 0x401200, 0)
sample = (struct.pack('<QIIQQQQQ', ip, 100, 101, 4, 4000, 2, 2**64 - 512, ip) +
          struct.pack('<QQQQQ', 2, 0, sp + 8, sp, ip) + struct.pack('<Q', 32) + stack +
          struct.pack('<Q', 32))
data = (rec(3, 1 << 13, struct.pack('<II', 100, 100) + cstr('prog') + tr(100, 100, 1)) +
        rec(10, 2, struct.pack('<IIQQQIIQQII', 100, 100, 0x400000, 0x2000, 0, 8, 1, 1234, 0, 5, 2)
            + cstr('/nonexistent/prog') + tr(100, 100, 2)) +
        rec(7, 0, struct.pack('<IIIIQ', 100, 100, 101, 100, 3) + tr(100, 101, 3)) +
        rec(9, 2, sample) +
        rec(4, 0, struct.pack('<IIIIQ', 100, 100, 101, 100, 5) + tr(100, 101, 5)))
host = cstr('seed')
host = struct.pack('<I', len(host)) + host
ids_at, attrs_at, data_at = 104, 112, 240
feat_at = data_at + len(data)
header = (b'PERFILE2' + struct.pack('<QQQQQQQQ', 104, 128, attrs_at, 128, data_at, len(data), 0, 0)
          + struct.pack('<QQQQ', 1 << 3, 0, 0, 0))
f = (header + struct.pack('<Q', 101) + attr + struct.pack('<QQ', ids_at, 8) + data +
     struct.pack('<QQ', feat_at + 16, len(host)) + host)
open(out + '/synthetic-file.data', 'wb').write(f)
p = b'PERFILE2' + struct.pack('<Q', 16) + rec(64, 0, attr + struct.pack('<Q', 101)) + data
open(out + '/synthetic-pipe.data', 'wb').write(p)
PY
  if ! command -v perf > /dev/null; then
    echo "fuzz: no perf here: synthetic perf.data seeds only"
    return 0
  fi
  [ -x "$perf_dir/recursion" ] || cc -O2 tests/fixtures/recursion.c -o "$perf_dir/recursion"
  local rec=(perf record -q -e cpu-clock -c 100000 --call-graph dwarf,1024)
  local run=(sh -c 'exec "$0" 1500 > /dev/null' "$perf_dir/recursion")
  if "${rec[@]}" -o "$1/recorded-file.data" -- "${run[@]}" > /dev/null 2>&1 &&
      "${rec[@]}" -o - -- "${run[@]}" > "$1/recorded-pipe.data" 2> /dev/null &&
      "${rec[@]}" -z -o "$1/recorded-zstd.data" -- "${run[@]}" > /dev/null 2>&1; then
    find "$1" -name 'recorded-*.data' -size +200k -delete # keep the seeds small
  else
    rm -f "$1"/recorded-*.data
    echo "fuzz: perf cannot record here (perf_event_paranoid?): synthetic perf.data seeds only"
  fi
}

# A ring buffer as `ehelf record` reads it (fuzz_ring): head and tail, then comm, mmap2, fork, a
# sample with registers and a stack copy, a lost record and exit, laid out as its events write
# them (sample_id trailers of tid, time, cpu), the sample wrapping around the ring's end.
ring_seed() { # DIR
  python3 - "$1" <<'PY'
import struct, sys
def rec(t, misc, body): return struct.pack('<IHH', t, misc, 8 + len(body)) + body
def cstr(s):
    b = s.encode() + b'\0'
    return b + b'\0' * (-len(b) % 8)
def tr(pid, tid, time): return struct.pack('<IIQII', pid, tid, time, 0, 0)
ip, sp = 0x401010, 0x7ffd0000
stack = struct.pack('<QQQQ', 0x401100, sp + 16, 0x401200, 0)
sample = (struct.pack('<QIIQIIQQQ', ip, 100, 101, 4, 0, 0, 4000, 2, 2**64 - 128) +
          struct.pack('<Q', 0xffffffff81000000) + struct.pack('<QQQQQ', 2, 0, sp + 8, sp, ip) +
          struct.pack('<Q', 32) + stack + struct.pack('<Q', 32))
data = (rec(3, 1 << 13, struct.pack('<II', 100, 100) + cstr('prog') + tr(100, 100, 1)) +
        rec(10, 2, struct.pack('<IIQQQIIQQII', 100, 100, 0x400000, 0x2000, 0, 8, 1, 1234, 0, 5, 2)
            + cstr('/bin/true') + tr(100, 100, 2)) +
        rec(7, 0, struct.pack('<IIIIQ', 100, 100, 101, 100, 3) + tr(100, 101, 3)) +
        rec(9, 1, sample) + rec(2, 0, struct.pack('<QQ', 1, 7) + tr(100, 101, 4)) +
        rec(4, 0, struct.pack('<IIIIQ', 100, 100, 101, 100, 5) + tr(100, 101, 5)))
size = 512
while size < len(data):
    size *= 2
tail = size - 64  # the records start 64 bytes before the end: the sample wraps
ring = bytearray(size)
for i, b in enumerate(data):
    ring[(tail + i) % size] = b
open(sys.argv[1] + '/ring.seed', 'wb').write(struct.pack('<II', len(data), tail) + bytes(ring))
PY
}

# A BTF as the kernel's has its structs (fuzz_kernel_btf): an integer, a pointer, a typedef, an
# array, a struct whose members sit in an anonymous struct inside it (mm_struct's), another one.
btf_seed() { # DIR
  python3 - "$1" <<'PY'
import struct, sys
names = b'\0u64\0mm_struct\0start_code\0exe_file\0context\0vdso\0ctx_t\0task_struct\0mm\0saved_auxv\0'
def name(s): return names.index(s.encode() + b'\0')
def t(n, kind, vlen, size_or_type, kflag=0):
    return struct.pack('<III', n, (kflag << 31) | (kind << 24) | vlen, size_or_type)
def member(n, typ, off): return struct.pack('<III', n, typ, off)
types = (t(name('u64'), 1, 0, 8) + struct.pack('<I', 64) +                       # 1 int
         t(0, 2, 0, 0) +                                                          # 2 void *
         t(0, 4, 1, 8) + member(name('vdso'), 2, 0) +                              # 3 {vdso}
         t(name('ctx_t'), 8, 0, 3) +                                              # 4 typedef
         t(0, 4, 4, 56) + member(name('start_code'), 1, 0) +                       # 5 anon
         member(name('exe_file'), 2, 64) + member(name('context'), 4, 128) +
         member(name('saved_auxv'), 8, 192) +
         t(name('mm_struct'), 4, 1, 32) + member(0, 5, 64) +                        # 6
         t(name('task_struct'), 4, 1, 16) + member(name('mm'), 2, 64) +           # 7
         t(0, 3, 0, 0) + struct.pack('<III', 1, 1, 4))                              # 8 u64[4]
header = struct.pack('<HBBIIIII', 0xeb9f, 1, 0, 24, 0, len(types), len(types), len(names))
open(sys.argv[1] + '/btf.seed', 'wb').write(header + types + names)
PY
}

# One target: seeds, then the run. Two targets run at a time (the machine's two cores).
run_target() { # NAME
  local name=$1 seeds="fuzz/corpus/${1#fuzz_}" work
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  [ "$name" = fuzz_backends ] && cp -r fuzz/corpus/cfi/. "$work"/ # the same input as fuzz_cfi's
  if [ "$name" = fuzz_elf ] || [ "$name" = fuzz_synth ]; then
    # ELF seeds are built from the fixtures here rather than committed as binaries.
    cc -O2 tests/fixtures/recursion.c -o "$work/recursion" && strip "$work/recursion"
    cc -O2 -no-pie tests/fixtures/recursion.c -o "$work/fixed" && strip "$work/fixed" # mov $main
    cc -nostartfiles -static -nostdlib tests/fixtures/cfi_variety.S -o "$work/cfi_variety"
    cc -O2 -g -fno-asynchronous-unwind-tables -c tests/fixtures/recursion.c -o "$work/rec.o"
    cp "$work/rec.o" "$work/member_name_longer_than_15.o"
    (cd "$work" && ar rc lib.a rec.o member_name_longer_than_15.o && rm member_name_longer_than_15.o)
    # C++: split functions, LSDAs (one with an exception specification), FDEs only (no symbols).
    g++ -std=c++14 -O2 -w tests/fixtures/synth_cold.cpp -o "$work/cold" && strip -s "$work/cold"
    cc -O2 tests/fixtures/synth_plt_got.c -o "$work/plt_got" # noreturn calls through .plt.got
    # A switch's cases in a .cold part known only from its FDE; a table entry at its function's end.
    cc -O2 -w tests/fixtures/synth_cold_switch.c -o "$work/cold_switch" && strip -s "$work/cold_switch"
    cc tests/fixtures/synth_switch_end.S -o "$work/switch_end" && strip -s "$work/switch_end"
  fi
  if [ "$name" = fuzz_eh_elf_check ]; then
    # eh_elfs as ehelf compiles them (the release build's CLI, if built; else the fuzz build has
    # no CLI and the target starts from nothing).
    cc -O2 tests/fixtures/recursion.c -o "$work/recursion.elf"
    for cli in build/bin/ehelf build-asan/bin/ehelf; do
      [ -x "$cli" ] || continue
      "$cli" compile "$work/recursion.elf" -o "$work/recursion.so" > /dev/null 2>&1 &&
        "$cli" compile --registers callee-saved "$work/recursion.elf" -o "$work/rec-cs.so" \
          > /dev/null 2>&1
      break
    done
    rm -f "$work/recursion.elf"
  fi
  if [ "$name" = fuzz_row_lookup ] || [ "$name" = fuzz_registered_frames ] ||
    [ "$name" = fuzz_backends ]; then
    # .eh_frame sections of a compiled fixture and of the hand-written CFI one, behind the
    # selector byte (0: a search table is built for the section's FDEs; registered as a section;
    # an .eh_frame).
    cc -O2 tests/fixtures/recursion.c -o "$work/recursion.elf"
    cc -nostartfiles -static -nostdlib tests/fixtures/cfi_variety.S -o "$work/cfi.elf"
    for elf in "$work"/*.elf; do
      objcopy -O binary --only-section=.eh_frame "$elf" "$elf.frame"
      { printf '\0'; cat "$elf.frame"; } > "${elf%.elf}.seed"
      rm -f "$elf" "$elf.frame"
    done
  fi
  if [ "$name" = fuzz_x86_decode ]; then
    # Machine code: the .text of a compiled fixture and of the hand-written CFI one.
    cc -O2 tests/fixtures/recursion.c -o "$work/recursion.elf"
    cc -nostartfiles -static -nostdlib tests/fixtures/cfi_variety.S -o "$work/cfi.elf"
    for elf in "$work"/*.elf; do
      objcopy -O binary --only-section=.text "$elf" "${elf%.elf}.text"
      rm -f "$elf"
    done
  fi
  if [ "$name" = fuzz_check_trace ]; then
    # Traces ehelf check records here (the release build's CLI, if built): a wrong-CFI fixture
    # and a C program through libc (threads, signals, the vDSO), in both stepping modes.
    for cli in build/bin/ehelf build-asan/bin/ehelf; do
      [ -x "$cli" ] || continue
      cc tests/fixtures/check_pop_adjust.S -o "$work/pop.elf"
      cc -O2 -pthread tests/fixtures/check_libc.c -o "$work/libc.elf"
      # check exits 1 on the wrong-CFI fixture (the inconsistency it finds): only the traces count.
      "$cli" check --record "$work/pop.trace" -- "$work/pop.elf" > /dev/null 2>&1 || true
      "$cli" check --single-step --record "$work/pop-step.trace" -- "$work/pop.elf" \
        > /dev/null 2>&1 || true
      "$cli" check --max-steps 20000 --record "$work/libc.trace" -- "$work/libc.elf" \
        > /dev/null 2>&1 || true
      rm -f "$work"/*.elf
      break
    done
  fi
  if [ "$name" = fuzz_perf ]; then
    perf_seeds "$work"
  fi
  if [ "$name" = fuzz_ring ]; then
    ring_seed "$work"
  fi
  if [ "$name" = fuzz_kernel_btf ]; then
    btf_seed "$work"
  fi
  echo "fuzz: $name for ${seconds}s ($(ls "$work" | wc -l) seeds)"
  if ! build-fuzz/bin/"$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=0 "$work" >"$work.log" 2>&1; then
    tail -40 "$work.log"
    echo "fuzz: $name FAILED" >&2
    return 1
  fi
  grep -E "^#[0-9]+ *DONE" "$work.log" | tail -1 || true
  rm -rf "$work" "$work.log"
}

failed=0
running=0
for src in fuzz/fuzz_*.cpp; do
  run_target "$(basename "$src" .cpp)" &
  running=$((running + 1))
  if [ "$running" -ge 2 ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
[ "$failed" -eq 0 ] || { echo "fuzz: a target failed (see above)" >&2; exit 1; }

