#!/usr/bin/env bash
# Samples of a process no mapping was recorded for (before its FORK/COMM/MMAP records, or with
# none): perf script prints their header line and no user frame (perf's unwinder makes a
# process's address space with its first mapping); `ehelf perf -f script` must do the same, and
# print every other sample as before. A `perf record --call-graph dwarf` recording whose first 3
# samples are moved to a pid the recording never mentions (python, in the file's bytes).
# Usage: test_perf_unmapped_process.sh BUILD_DIR [SOURCE_DIR]
source "$(dirname "$0")/common.sh" "$@"
for tool in perf gcc python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: needs $tool"; exit 77; }
done
cd "$work" || exit 1
cat >busy.c <<'EOF'
__attribute__((noinline)) long work(long n) {
  volatile long s = 0;
  for (long i = 0; i < n; ++i)
    s += i * i;
  return s;
}
int main(void) {
  long s = 0;
  for (int k = 0; k < 400; ++k)
    s += work(3000000);
  return (int)(s & 1);
}
EOF
gcc -O1 -g -o busy busy.c || { echo "FAIL: gcc"; exit 1; }
if ! perf record -q -e cpu-clock -F 999 --call-graph dwarf -o p.data ./busy >/dev/null 2>&1 ||
    [ "$(perf script -i p.data 2>/dev/null | grep -c '^busy ')" -lt 10 ]; then
  echo "SKIP: perf record gave no samples here"
  exit 77
fi
# The first 3 samples (type 9) get pid and tid 424242: their ip is the first u64 of the body
# (sample_type IP|TID|...), pid and tid the next two u32.
cat >patch.py <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
off, size = struct.unpack_from('<QQ', b, 40)
pos, moved = off, 0
while pos < off + size and moved < 3:
    typ, misc, sz = struct.unpack_from('<IHH', b, pos)
    if typ == 9:
        struct.pack_into('<II', b, pos + 16, 424242, 424242)
        moved += 1
    pos += sz
open(sys.argv[2], 'wb').write(b)
EOF
python3 patch.py p.data q.data

# Per sample of pid 424242: its frame lines (those between its header and the blank line).
frames_of_unknown() { awk '/^[^\t ]/ {on = / 424242[ \/]/; next} on && NF {n++} END {print n + 0}'; }
headers_of_unknown() { grep -c '^:424242 424242' || true; }
perf script -i q.data >perf.txt 2>/dev/null
"$ehelf" perf -f script q.data >ours.txt 2>ours.err || bad "ehelf perf: $(head -c 300 ours.err)"
[ "$(headers_of_unknown <perf.txt)" = 3 ] || bad "perf script: not 3 samples of pid 424242"
[ "$(headers_of_unknown <ours.txt)" = 3 ] || bad "ehelf: not 3 samples of pid 424242"
theirs=$(frames_of_unknown <perf.txt)
ours=$(frames_of_unknown <ours.txt)
if [ "$ours" != "$theirs" ]; then
  bad "samples of an unmapped process: $ours frame lines, perf script $theirs"
else
  ok "samples of an unmapped process: $ours frame lines, as perf script"
fi
# The other samples: as in the recording before the change of pid. The moved samples are the
# first 3 in the file, not always the first 3 printed (samples print in time order, and the file
# holds each CPU's buffer in turn): those of the same times are left out of the recording before.
"$ehelf" perf -f script p.data >before.txt 2>/dev/null
moved_times=$(awk 'BEGIN {RS = ""} / 424242[ \/]/ {split($0, l, "\n"); print l[1]}' ours.txt |
  grep -oE ' [0-9]+\.[0-9]+:' | tr -d ' ')
without() { # FILE: its samples but the moved ones (pid 424242, or one of their times)
  awk -v times="$moved_times" 'BEGIN {RS = ""; ORS = "\n\n"; n = split(times, t, "\n")
    for (i = 1; i <= n; i++) skip[t[i]] = 1}
  {split($0, l, "\n"); if (l[1] ~ / 424242[ \/]/) next
   m = split(l[1], w, " "); for (i = 1; i <= m; i++) if (w[i] in skip) next; print}' "$1"
}
if [ "$(echo "$moved_times" | grep -c .)" != 3 ]; then
  bad "the moved samples' times: '$moved_times'"
elif ! diff -q <(without before.txt) <(without ours.txt) >/dev/null; then
  bad "the other samples changed: $(diff <(without before.txt) <(without ours.txt) | head -5)"
else
  ok "the other $(without ours.txt | grep -c '^busy ') samples as before"
fi
[ $fail = 0 ] && echo PASS
exit $fail
