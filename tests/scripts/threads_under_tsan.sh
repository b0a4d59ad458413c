#!/usr/bin/env bash
# ehelf perf's two threads (-j 2: the records read and the stacks unwound on one, named and
# printed on the other; for -f folded, each distinct stack named there) under ThreadSanitizer,
# on recordings made here: xz -9 and python3 with DWARF call graphs, the whole system while they
# run (many processes sharing modules), a pipe recording read from standard input, a -g recording
# and one without call graph. Each run must end without a ThreadSanitizer report and give what
# -j 1 gives. Then ehelf record --unwind kernel (its table builder thread) where BPF loads.
# Usage: threads_under_tsan.sh EHELF   (build-tsan/bin/ehelf: scripts/build.sh tsan). Run by
# scripts/test.sh after ctest, not by ctest (whose script tests, tests/scripts/test_*.sh, get the
# ASan build).
set -uo pipefail
EHELF=$(realpath "$1")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export PERF_BUILDID_DIR="$TMP/buildid-cache"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v perf > /dev/null || fail "perf is not installed (scripts/setup.sh installs linux-perf)"
cd "$TMP"
# perf record dies now and then in its build-id pass beside other recordings: made again (three
# times at most) when it is killed or aborts.
record() {
  local out=$1 try status
  shift
  for try in 1 2 3; do
    perf record -q "$@" > "$out" 2> record.log && return 0
    status=$?
    [ "$status" -ge 128 ] || { cat record.log; return "$status"; }
  done
  return "$status"
}
head -c 3000000 /dev/urandom > input.bin
cat > work.py << 'PY'
import json
d = [{"a": i, "b": str(i) * 5} for i in range(60000)]
json.loads(json.dumps(d)); sorted(d, key=lambda x: x["b"])
PY
dwarf=(-e cpu-clock -F 2000 --call-graph dwarf)
record /dev/null "${dwarf[@]}" -o xz.data -- xz -9 -c -T1 input.bin || fail "perf record xz"
record /dev/null "${dwarf[@]}" -o py.data -- python3 work.py || fail "perf record python3"
record pipe.data "${dwarf[@]}" -o - -- xz -6 -c -T1 input.bin || fail "perf record -o -"
record /dev/null -e cpu-clock -F 2000 -g -o fp.data -- xz -9 -c -T1 input.bin || fail "perf record -g"
record /dev/null -e cpu-clock -F 2000 -o ip.data -- xz -9 -c -T1 input.bin || fail "perf record"
files=(xz py fp ip)
xz -9 -c -T1 input.bin > /dev/null &
background=$!
python3 work.py &
if record /dev/null -a -e cpu-clock -F 500 --call-graph dwarf -o all.data -- sleep 1; then
  files+=(all)
else
  echo "SKIP the system-wide recording: perf record -a failed here"
fi
kill "$background" 2> /dev/null
wait

check() { # name, then ehelf perf's arguments (-j added)
  local name=$1
  shift
  "$EHELF" perf -j2 "$@" > two.out 2> two.err
  local rc=$?
  [ $rc -eq 66 ] && { cat two.err; fail "$name: ThreadSanitizer report"; }
  [ $rc -eq 0 ] || { cat two.err; fail "$name: exit $rc"; }
  "$EHELF" perf -j1 "$@" > one.out 2> /dev/null || fail "$name: -j1 failed"
  cmp -s one.out two.out || fail "$name: -j2 differs from -j1"
  [ -s two.out ] || fail "$name: nothing printed"
}
for f in "${files[@]}"; do
  check "$f.data" -v "$f.data"
  check "$f.data json" -f json --offsets "$f.data"
  check "$f.data folded" -f folded "$f.data"
done
"$EHELF" perf -j2 - < pipe.data > two.out 2> two.err
rc=$?
[ $rc -eq 66 ] && { cat two.err; fail "pipe on stdin: ThreadSanitizer report"; }
[ $rc -eq 0 ] && [ -s two.out ] || fail "pipe on stdin: exit $rc"
echo "ok: ehelf perf -j2 under ThreadSanitizer on ${files[*]} and a pipe: no report, -j1's output"

# ehelf record --unwind kernel: its tables built on a thread of their own while the reader
# publishes processes and drains counts (a loop of compilers: new processes, a large cc1 table,
# files known and not), and the background kallsyms reader. Root only (the BPF program).
printf 'int f(int x) { return x * 2; }\n' > small.c
if [ "$(id -u)" -eq 0 ] && "$EHELF" record -q --unwind kernel -o probe.folded -- true 2> /dev/null; then
  "$EHELF" record -q --unwind kernel -F 4000 -o kernel.folded -- \
    sh -c 'for i in 1 2 3 4 5; do gcc -O2 -c small.c -o small.o; done; python3 work.py' 2> kernel.err
  rc=$?
  [ $rc -eq 66 ] && { cat kernel.err; fail "record --unwind kernel: ThreadSanitizer report"; }
  [ $rc -eq 0 ] && [ -s kernel.folded ] || { cat kernel.err; fail "record --unwind kernel: exit $rc"; }
  echo "ok: ehelf record --unwind kernel under ThreadSanitizer (a compiler loop, python3): no report"
else
  echo "SKIP ehelf record --unwind kernel under ThreadSanitizer: the BPF program cannot be loaded here"
fi
