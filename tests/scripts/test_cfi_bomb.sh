#!/usr/bin/env bash
# A compressed .debug_frame bomb (cfi_bomb.py: one FDE of 2 million rows, 6 MB of CFA program
# in a 22 KB file) is refused within bounded memory and time: `stats`, `dump` and `verify` name
# the file, the section and the offset in one line and do not crash; `dump` prints what readelf
# -wF prints up to the row limit; `stack -p` and `record -p` on the running program unwind it by
# frame pointers (spin called from main, as the source says) and go on. A bomb of 270,000 distinct
# rows in 6 FDEs hits the module's distinct-row limit. Memory is checked with `ulimit -v` (not
# under ASan, which reserves terabytes) and /usr/bin/time's maximum RSS; every run under
# `timeout`. Before the limits, `stats` took 714 MB for the 22 KB file and `verify` 433 MB.
# Usage: test_cfi_bomb.sh BUILD_DIR [SOURCE_DIR]
source "$(dirname "$0")/common.sh" "$@"
src=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
for tool in gcc objcopy readelf python3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "SKIP: needs $tool"; exit 77; }
done
cd "$work" || exit 1

# A program that spins in spin() called from main, with frame pointers and no .eh_frame of its
# own: only the bomb describes main and spin.
cat >spin.c <<'EOF'
#include <stdio.h>
__attribute__((noinline)) void spin(void) {
  for (volatile unsigned long i = 0;; ++i) {
  }
}
int main(void) {
  puts("ready"); /* spinning from now on */
  fflush(stdout);
  spin();
  return 0;
}
EOF
make_bomb() { # NAME COUNT [FDES] [--distinct]
  local name=$1
  shift
  python3 "$src/tests/scripts/cfi_bomb.py" "$@" >"$name.S" &&
    gcc -O1 -fno-omit-frame-pointer -fno-asynchronous-unwind-tables -o "$name.big" spin.c \
      "$name.S" &&
    objcopy --remove-section .eh_frame_hdr --compress-debug-sections "$name.big" "$name"
}
make_bomb bomb 2000000 || { echo "FAIL: could not build the bomb"; exit 1; }
make_bomb distinct 45000 6 --distinct || { echo "FAIL: could not build the distinct bomb"; exit 1; }
# 4.5 million rows in 100 FDEs, each within the limits of one FDE: the module's limit refuses it
# (stats counted all its rows before: 87 million of them in a 300 KB file took 17 s).
make_bomb spread 45000 100 || { echo "FAIL: could not build the spread bomb"; exit 1; }
grep -q ' .debug_frame .* C ' <<<"$(readelf -SW bomb)" || bad "objcopy did not compress .debug_frame"
echo "bomb: $(stat -c %s bomb) bytes ($(stat -c %s bomb.big) before compression)"

# 320 MiB: the limits keep a table far below; before them, 433 to 714 MB. (Under ASan, whose
# shadow memory counts in the RSS, verify's BPF rows check and record's in-kernel walk, with the
# tables it loads before the program runs, take `verify distinct` and `record -p` to 264-269 MB.)
max_kb=327680
# Runs ehelf under the memory and time bounds; its status in $rc, its maximum RSS in $rss_kb.
bounded() { # OUT ERR ARGS...
  local out=$1 err=$2
  shift 2
  (
    [ $sanitized = 1 ] || ulimit -v $((max_kb * 4))
    exec /usr/bin/time -f '%M' -o "$work/rss" timeout 120 "$ehelf" "$@"
  ) >"$out" 2>"$err"
  rc=$?
  rss_kb=$(tail -1 "$work/rss" 2>/dev/null)
  rss_kb=${rss_kb:-0}
  case $rss_kb in *[!0-9]*) rss_kb=0 ;; esac
}
# The run ended by itself (no signal, no timeout), within memory, saying `pattern` on one line.
judge() { # WHAT PATTERN FILE
  local what=$1 pattern=$2 file=$3
  if [ $rc -ge 124 ]; then
    bad "$what: status $rc (killed or crashed): $(head -c 300 "$work/$what.err")"
  elif [ "$rss_kb" -gt $max_kb ]; then
    bad "$what: $rss_kb KB of memory (bound $max_kb)"
  elif [ "$(grep -cE "$pattern" "$file")" != 1 ]; then
    bad "$what: no one line matching '$pattern': $(head -c 300 "$file")"
  else
    ok "$what: status $rc, $rss_kb KB: $(grep -E "$pattern" "$file" | head -1)"
  fi
}

refusal='bomb: \.debug_frame\+0x[0-9a-f]+: .*more than [0-9]+ (instructions in one program|rows in one FDE): refused'
bounded stats.out stats.err stats --no-progress bomb
judge stats "$refusal" stats.out
bounded verify.out verify.err verify bomb
judge verify "$refusal" verify.err
[ $rc = 0 ] && bad "verify: status 0 on a refused table"

# dump: readelf's rows up to the limit, then one warning; the oracle is readelf's own first lines.
bounded dump.out dump.err dump bomb
judge dump 'warning: bomb: \.debug_frame\+0x18: more than [0-9]+ rows in one entry' dump.err
[ $rc = 1 ] || bad "dump: status $rc where 1 (a warning) was expected"
lines=$(wc -l <dump.out)
readelf -wF bomb 2>/dev/null | head -n "$((lines - 1))" >readelf.head
if [ "$lines" -lt 65536 ] || ! diff -q <(head -n "$((lines - 1))" dump.out) readelf.head >/dev/null; then
  bad "dump: its $lines lines are not readelf -wF's first ones"
else
  ok "dump: its first $((lines - 1)) lines are readelf -wF's"
fi

spread='spread: \.debug_frame\+0x[0-9a-f]+: more than [0-9]+ rows in the module.s tables: refused'
# The module's limit lets a table reach 4 million rows before refusing it (verify builds them):
# 456 MB under ASan, so a bound of its own here; before the limit applied to stats, the same
# rows in 87 million took it 17 s.
max_kb=786432
for command in stats verify; do
  bounded "spread-$command.out" "spread-$command.err" $command spread
  judge "spread-$command" "$spread" "spread-$command.$([ $command = stats ] && echo out || echo err)"
done
max_kb=327680

distinct='distinct: \.debug_frame\+0x[0-9a-f]+: more than [0-9]+ distinct rows in the module'
bounded distinct.out distinct.err verify distinct
judge distinct "$distinct" distinct.err

# The running program: unwound by frame pointers through the refused module.
./bomb > bomb.out &
pid=$!
for _ in $(seq 200); do grep -q ready bomb.out && break; sleep 0.05; done
grep -q ready bomb.out || bad "bomb did not get ready"
bounded stack.out stack.err stack -p "$pid"
if [ $rc -ge 124 ] || [ "$rss_kb" -gt $max_kb ]; then
  bad "stack -p: status $rc, $rss_kb KB: $(head -c 300 stack.err)"
elif ! grep -qE ' spin$' stack.out || ! grep -qE ' main$' stack.out; then
  bad "stack -p: no spin and main frames: $(head -c 400 stack.out)"
else
  ok "stack -p: spin and main by frame pointers, $rss_kb KB"
fi
if "$ehelf" record -q -d 0.2 -o probe.folded -- true 2>/dev/null; then
  bounded record.out record.err record -q -p "$pid" -d 1 -o record.folded
  if [ $rc -ge 124 ] || [ "$rss_kb" -gt $max_kb ]; then
    bad "record -p: status $rc, $rss_kb KB: $(head -c 300 record.err)"
  elif ! grep -qE '^bomb;.*;main;spin [0-9]+$' record.folded; then
    bad "record -p: no bomb;...;main;spin stack: $(head -c 400 record.folded)"
  else
    ok "record -p: main;spin by frame pointers, $rss_kb KB"
  fi
else
  echo "SKIP record -p: perf events not available here"
fi
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

[ $fail = 0 ] && echo PASS
exit $fail
