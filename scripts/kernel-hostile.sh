#!/usr/bin/env bash
# (One file of 930 lines: a campaign of self-contained attacks sharing one set-up, read case by case.)
# Attacks on `ehelf record --unwind kernel` (the in-kernel walk's hostile cases), one at a time, each
# printing one line: NAME PASS|FAIL|SKIP and what was measured (ehelf's exit status, its peak
# RSS from /usr/bin/time -f %M, wall seconds, samples, the summary's "kernel walks that stopped
# early" line, what became of the recorded processes, the BPF map memory ehelf held mid-run
# (kmem: bpftool's memlock of every map it has a descriptor of), what stayed in the kernel).
#
#   dlopen-cmd     a process dlopen()ing 3,000 distinct shared libraries (copies of 4 small
#                  ones under other names), calling into each, under record -F 999 -- prog
#   dlopen-p       the same process attached with -p once its 3,000 libraries are loaded
#   storm-cmd      sh exec'ing 2,000 short programs (/bin/true and a tiny C program) under record
#   storm-chain    one process exec'ing itself 2,000 times (the same pid, 2,000 address spaces)
#   storm-a        a second storm running while `record -a -d 5` records the whole system
#   forkbomb       a tree of forks (width 13, depth 3) capped at 2,000 processes by a shared
#                  counter, each busy ~2 ms and exiting, under record
#   replace-inplace  a process with a library on its stack (lib_call -> spin) and a copy of the
#                  largest library here mmap'd executable, recorded with -p: both files truncated
#                  and rewritten in place (other bytes, other sizes) while ehelf builds them again
#                  (each change remapped by the process: a new mmap record)
#   replace-rename the same files replaced by rename (a valid other library, random bytes)
#   replace-deleted the same files deleted after being mapped, before and during the run
#   elf-crafted    1,368 crafted_cfi.py files, fuzz/corpus/*, 300 mutated and truncated copies
#                  of a small library, mmap'd PROT_READ|PROT_EXEC by a process spinning in its
#                  own code that puts each file's addresses on its stack as return addresses
#   elf-bomb       cfi_bomb.py's 2-million-row compressed .debug_frame (test_cfi_bomb.sh's
#                  build) and the fuzz corpus's regression bombs mapped the same way, and the
#                  bomb run as a program itself
#   sigkill        ehelf killed with SIGKILL 2.5 s into `record -p` of the 3,000-library process
#                  (its builder thread busy), which must run on
#
# Requirements checked on every attack: ehelf's exit status 0 (the command's own, which exits 0
# natively) and no crash (a signal, a timeout, a sanitizer or abort message); ehelf's peak RSS
# under $rss_bound_kb and its address space under `ulimit -v` ($vm_bound_kb, which the recorded
# command inherits); wall time within the command's native time x 1.5 + 5 s, or -d + 5 s; -p
# targets alive afterwards (not stopped), commands ended with status 0 and none of their
# processes left; and 5 s after the run no BPF program named ehelf_sample and no map named
# row_shards, counts0 or processes newer than this script's start and held by no live process
# (those another user's run holds by a file descriptor are not ours; one held by a process this
# script started is a leak).
#
# Usage: [KH_ONLY="NAME..."] [KH_KEEP=1] scripts/kernel-hostile.sh [BUILD_DIR]
# (default /work/main/build: a release build, not rebuilt here; needs root, bpftool, gcc,
# python3, objcopy; ~2 minutes on 2 cores, ~250 MB of RSS at most, ~600 MB in /tmp). Exit status 0 when no attack
# failed, 1 otherwise, 2 on a set-up error. Everything started is killed (by pid) and the
# scratch directory removed on exit (kept with KH_KEEP=1); KH_ONLY runs only the attacks whose
# names start with one of its words.
# shellcheck disable=SC2317 # functions called from traps
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_arg=${1:-/work/main/build}
ehelf=
[ -d "$build_arg" ] && ehelf="$(cd "$build_arg" && pwd)/bin/ehelf"
if [ -z "$ehelf" ] || [ ! -x "$ehelf" ]; then
  echo "kernel-hostile: no ehelf at $build_arg/bin/ehelf" >&2
  exit 2
fi
for tool in gcc objcopy nm python3 bpftool /usr/bin/time timeout; do
  command -v "$tool" >/dev/null || { echo "kernel-hostile: needs $tool" >&2; exit 2; }
done

rss_bound_kb=$((1 << 20)) # 1 GiB of RSS for ehelf
vm_bound_kb=$((3 << 20))  # ulimit -v 3 GiB for ehelf and the command it runs
target_vm_kb=$((1 << 20)) # ulimit -v 1 GiB for the processes attached with -p
work=$(mktemp -d /tmp/kernel-hostile.XXXXXX)
bg_pids=()
# Every process this script started: the ones it tracks, and any whose command line names the
# scratch directory (every program here is run by its path in it), killed by pid. Read with
# bash's own mapfile, no process per pid: the scan takes milliseconds, not seconds.
ours() {
  local d pid args
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
    args=()
    { mapfile -d '' -t args <"$d/cmdline"; } 2>/dev/null || continue
    [[ " ${args[*]} " == *"$work/"* ]] && echo "$pid"
  done
  return 0
}
kill_ours() {
  local pid
  for pid in "${bg_pids[@]}" $(ours); do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  bg_pids=()
}
cleanup() {
  kill_ours
  sleep 0.2
  kill_ours
  if [ -n "${KH_KEEP:-}" ]; then echo "kernel-hostile: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$work"
start=$EPOCHREALTIME
source "$repo/scripts/campaign-lib.sh"
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; } # A <= B, decimals
alive() { # PID: exists, is not a zombie, is not stopped
  local s
  s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || true
  [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ] && [ "$s" != T ] && [ "$s" != t ]
}
wait_line() { # FILE PATTERN SECONDS: waits until FILE has a line matching PATTERN
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    grep -qE -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
start_bg() { # OUT COMMAND...: under ulimit -v $target_vm_kb, its pid in $bg_pid
  local out=$1
  shift
  (
    ulimit -v "$target_vm_kb"
    exec "$@"
  ) >"$out" 2>&1 </dev/null &
  bg_pid=$!
  bg_pids+=("$bg_pid")
}
# KH_ONLY="NAME..." (prefixes) runs only those attacks.
want() {
  local n w
  [ -z "${KH_ONLY:-}" ] && return 0
  for n in "$@"; do for w in $KH_ONLY; do [[ "$n" == "$w"* ]] && return 0; done; done
  return 1
}
stop_bg() {
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# ---- what stays in the kernel ------------------------------------------------------------------
# Ids are never reused while the kernel runs: anything of ours has an id above the highest one
# seen when the script started.
# (bpftool fails now and then while another user's programs come and go: no id, not an exit.)
max_id() {
  { bpftool "$1" list 2>/dev/null || true; } | sed -n 's/^\([0-9][0-9]*\): .*/\1/p' | sort -n | tail -1
}
base_prog=$(max_id prog)
base_prog=${base_prog:-0}
base_map=$(max_id map)
base_map=${base_map:-0}
# "prog ID" and "map ID NAME" of ehelf's program and maps created since the start.
kernel_objects() {
  local progs maps
  progs=$(bpftool prog list 2>/dev/null) || return 1
  maps=$(bpftool map list 2>/dev/null) || return 1
  printf '%s\n' "$progs" |
    awk -v b="$base_prog" '$2 == "perf_event" && $3 == "name" && $4 == "ehelf_sample" {
      id = $1; sub(":", "", id); if (id + 0 > b) print "prog " id }'
  printf '%s\n' "$maps" |
    awk -v b="$base_map" '$3 == "name" && ($4 == "row_shards" || $4 == "counts0" || $4 == "processes") {
      id = $1; sub(":", "", id); if (id + 0 > b) print "map " id " " $4 }'
}
# Of those, the ones no live process holds by a file descriptor, or one of ours holds (a leak
# into a recorded process); another user's ehelf holding its own is not ours. Waits up to 5 s.
kernel_left=
kernel_clean() {
  local i objs held mine line kind id pid
  kernel_left=
  for ((i = 0; i < 50; i++)); do
    if ! objs=$(kernel_objects); then # bpftool failed (a program gone while it listed): again
      kernel_left="(bpftool failed) "
      sleep 0.1
      continue
    fi
    [ -z "$objs" ] && return 0
    held=$(grep -Hs -E '^(prog_id|map_id):' /proc/[0-9]*/fdinfo/* 2>/dev/null |
      sed -n 's|^/proc/\([0-9]*\)/fdinfo/[0-9]*:\(prog\|map\)_id:[[:space:]]*\([0-9]*\)$|\2 \3 \1|p' || true)
    mine=" $(ours | tr '\n' ' ') "
    kernel_left=
    while read -r line; do
      [ -n "$line" ] || continue
      read -r kind id _ <<<"$line"
      pid=$(awk -v k="$kind" -v i="$id" '$1 == k && $2 == i { print $3; exit }' <<<"$held")
      if [ -z "$pid" ]; then
        kernel_left+="${line// /:} "
      elif [[ "$mine" == *" $pid "* ]]; then
        kernel_left+="${line// /:}(held by our pid $pid) "
      fi
    done <<<"$objs"
    [ -z "$kernel_left" ] && return 0
    sleep 0.1
  done
  return 1
}

# The ehelf this script runs now (its pid), and the BPF map memory it holds (memlock, the
# kernel's memory, which its RSS does not show): every map it has a file descriptor of.
our_ehelf() {
  local pid
  for pid in $(ours); do
    # (" (deleted)" after it when the build is replaced meanwhile)
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null || true)" == "$ehelf"* ]] && { echo "$pid"; return 0; }
  done
  return 0
}
kernel_mem() { # PID: MiB
  local ids
  ids=$(grep -hs '^map_id:' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{ print $2 }' | sort -u | tr '\n' ' ' || true)
  bpftool -j map list 2>/dev/null | python3 -c '
import json, sys
ids = set(int(i) for i in sys.argv[1].split())
print("%.1f" % (sum(m.get("bytes_memlock", 0) for m in json.load(sys.stdin) if m["id"] in ids) / 2**20))
' "$ids" 2>/dev/null || echo "?"
}
# The kernel memory of the ehelf running now, measured AT seconds from now (in $kmem).
measure_kmem_at() { # AT
  local pid
  sleep "$1"
  pid=$(our_ehelf)
  kmem="?"
  [ -n "$pid" ] && kmem=$(kernel_mem "$pid")
  echo "$kmem" >"$work/kmem"
}

# ---- running ehelf -----------------------------------------------------------------------------
# ehelf ARGS... under ulimit -v and timeout: $rc, $kb (peak RSS), $secs; stderr in NAME.err.
run() { # NAME SECONDS ARGS...
  local name=$1 seconds=$2
  shift 2
  run_bounded "$vm_bound_kb" "$seconds" "$work/$name.out" "$work/$name.err" "$work/$name.rss" "$@"
  echo "$rc $kb $secs" >"$work/$name.result"
}
# run, with the kernel memory of its maps measured AT seconds in (in $kmem).
run_at() { # AT NAME SECONDS ARGS...
  local at=$1 name=$2
  shift
  run "$@" &
  local job=$!
  measure_kmem_at "$at"
  wait "$job" || true
  load_result "$name"
  kmem=$(cat "$work/kmem")
}
# The result of a run made in the background.
load_result() { read -r rc kb secs <"$work/$1.result" || { rc=999 kb=0 secs=0; }; }
# Seconds a command takes natively (the time bound's base).
native() { # COMMAND...
  local t0=$EPOCHREALTIME
  native_rc=0
  (
    ulimit -v "$vm_bound_kb"
    exec timeout -k 5 60 "$@"
  ) >"$work/native.out" 2>&1 </dev/null || native_rc=$?
  native_secs=$(since "$t0")
}
# Judges the run of NAME: status WANT_RC (0), memory, time under LIMIT seconds, the kernel
# clean; EXTRA is more of the line, PROBLEM (non-empty: FAIL) what else went wrong.
judge() { # NAME LIMIT EXTRA PROBLEM
  local name=$1 limit=$2 extra=$3 problem=$4 err=$work/$1.err samples early crash
  samples=$(sed -n 's/^\([0-9][0-9]*\) samples .*/\1/p' "$err" | head -1)
  early=$(sed -n 's/^ *kernel walks that stopped early: //p' "$err" | head -1)
  crash=$(grep -m1 -E 'Sanitizer|runtime error:|terminate called|Assertion .* failed|Segmentation fault|Aborted|core dumped|double free|corrupted|stack smashing' "$err" || true)
  [ "$rc" = 0 ] || problem+=" status $rc: $(grep -v '^ ' "$err" | head -2 | tr '\n' '|' | cut -c1-200 || true);"
  [ -z "$crash" ] || problem+=" crash: $crash;"
  [ "$kb" -le "$rss_bound_kb" ] || problem+=" RSS over $((rss_bound_kb >> 10)) MB;"
  le "$secs" "$limit" || problem+=" ${secs}s over ${limit}s;"
  local kernel=clean
  kernel_clean || { kernel="LEFT: $kernel_left"; problem+=" left in the kernel;"; }
  local detail
  detail="rc=$rc rss=$((kb >> 10))MB ${secs}s(<=$limit) samples=${samples:-none} early=[${early:-none}] $extra kernel=$kernel"
  if [ -z "$problem" ]; then
    report "$name" PASS "$detail"
  else
    report "$name" FAIL "$detail; FAILED:$problem"
  fi
}
cmd_limit() { awk -v n="$native_secs" 'BEGIN { printf "%.1f", n * 1.5 + 5 }'; }
# The processes of a finished command: none of ours may be left.
leftovers() {
  local left
  left=$(ours | wc -l)
  echo "$left"
}
# After a command run: $left (its processes still there) and $problem (what went wrong with it).
command_problems() {
  left=$(leftovers)
  problem=
  [ "$native_rc" = 0 ] || problem=" status $native_rc natively;"
  [ "$left" = 0 ] || problem+=" $left processes left;"
}

# ---- set-up ------------------------------------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
  for a in dlopen-cmd dlopen-p storm-cmd storm-chain storm-a forkbomb replace-inplace \
    replace-rename replace-deleted elf-crafted elf-bomb sigkill; do
    report "$a" SKIP "not root: --unwind kernel needs root here"
  done
  exit 0
fi
if ! "$ehelf" record --unwind kernel -q -d 0.2 -f folded -o "$work/probe.folded" -- true \
  >"$work/probe.err" 2>&1; then
  echo "kernel-hostile: SKIP all: record --unwind kernel does not run here: $(head -3 "$work/probe.err")"
  exit 0
fi
kernel_clean || echo "kernel-hostile: note: left after the probe: $kernel_left"

cflags=(-O1 -g -fno-omit-frame-pointer -Wall)
cat >lib.c <<'EOF'
/* A small library; VARIANT functions more make the copies' tables differ in size. */
volatile unsigned long lib_sink;
#define F(n) __attribute__((noinline)) unsigned long f##n(unsigned long x) { return x * n + lib_sink; }
#if VARIANT >= 1
F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10)
#endif
#if VARIANT >= 2
F(11) F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23) F(24) F(25) F(26)
F(27) F(28) F(29) F(30) F(31) F(32) F(33) F(34) F(35) F(36) F(37) F(38) F(39) F(40)
#endif
#if VARIANT >= 3
F(41) F(42) F(43) F(44) F(45) F(46) F(47) F(48) F(49) F(50) F(51) F(52) F(53) F(54) F(55) F(56)
F(57) F(58) F(59) F(60) F(61) F(62) F(63) F(64) F(65) F(66) F(67) F(68) F(69) F(70) F(71) F(72)
#endif
__attribute__((noinline)) unsigned long lib_work(unsigned long n) {
  unsigned long s = 0;
  for (unsigned long i = 0; i < n; i++) s += i * (VARIANT + 3);
  lib_sink = s;
  return s;
}
/* Calls back into the program: this frame stays on the stack while the program spins. */
__attribute__((noinline)) void lib_call(void (*cb)(void)) {
  cb();
  lib_sink++;
}
EOF
cat >dlmany.c <<'EOF'
/* dlmany DIR COUNT SECONDS|forever: dlopens DIR/libN.so for N < COUNT, says "ready", then calls
 * each library's lib_work in turn for SECONDS (forever: until killed, 120 s at most). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  int count = atoi(argv[2]);
  int forever = strcmp(argv[3], "forever") == 0;
  double seconds = forever ? 120 : atof(argv[3]);
  alarm(150);
  unsigned long (**work)(unsigned long) = calloc(count, sizeof *work);
  char path[4096];
  for (int i = 0; i < count; i++) {
    snprintf(path, sizeof path, "%s/lib%d.so", argv[1], i);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !(work[i] = (unsigned long (*)(unsigned long))dlsym(h, "lib_work"))) {
      fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
      return 3;
    }
  }
  printf("ready %d\n", count);
  fflush(stdout);
  double end = now() + seconds;
  unsigned long s = 0;
  while (now() < end)
    for (int i = 0; i < count; i++) s += work[i](500);
  printf("done %lu\n", s & 1);
  return 0;
}
EOF
cat >tiny.c <<'EOF'
int main(void) { return 0; }
EOF
cat >execchain.c <<'EOF'
/* execchain N: execs itself with N - 1 until 0 (the same process, N exec'd programs). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 0;
  if (n <= 0) return 0;
  char next[32];
  snprintf(next, sizeof next, "%ld", n - 1);
  execl("/proc/self/exe", argv[0], next, (char *)0);
  perror("execl");
  return 1;
}
EOF
cat >forkbomb.c <<'EOF'
/* forkbomb WIDTH DEPTH CAP: each process is busy ~2 ms, forks WIDTH children (while the shared
 * counter of processes made stays under CAP, a hard cap), waits for them and exits 0 if all of
 * them did. Every child has a 60 s alarm. Prints the number of processes. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
static atomic_int *made;
static int width, cap;
static void busy(void) {
  for (volatile unsigned long i = 0; i < 2000000; i++) {
  }
}
static int node(int depth) {
  pid_t kids[64];
  int n = 0, failed = 0;
  busy();
  for (int w = 0; depth > 0 && w < width; w++) {
    if (atomic_fetch_add(made, 1) >= cap) break;
    pid_t p = fork();
    if (p < 0) {
      failed = 1;
      break;
    }
    if (p == 0) {
      alarm(60);
      _exit(node(depth - 1));
    }
    kids[n++] = p;
  }
  for (int i = 0; i < n; i++) {
    int st;
    if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  return failed;
}
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  width = atoi(argv[1]);
  cap = atoi(argv[3]);
  if (width > 64) return 2;
  made = mmap(0, sizeof *made, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (made == MAP_FAILED) return 2;
  alarm(60);
  int failed = node(atoi(argv[2]));
  int total = atomic_load(made);
  printf("%d processes\n", (total < cap ? total : cap) + 1);
  return failed;
}
EOF
cat >hold.c <<'EOF'
/* hold LIB BIG: dlopens LIB and mmaps BIG executable, says "ready", then spins in its own code
 * called back from LIB's lib_call (a frame of LIB stays on the stack). On SIGUSR1: maps both
 * files again as they are now (replacing its previous extra mappings) and dlopens LIB by a path
 * spelled anew (a file replaced by rename loads as a new object). 120 s at most. */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
static volatile sig_atomic_t asked;
static const char *lib, *big;
static void *extra[2];
static size_t extra_size[2];
static int spelled;
static void on_usr1(int s) { (void)s; asked++; }
static void map_again(int slot, const char *path) {
  if (extra[slot]) munmap(extra[slot], extra_size[slot]);
  extra[slot] = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void *p = mmap(0, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      extra[slot] = p;
      extra_size[slot] = st.st_size;
    }
  }
  close(fd);
}
static void spin(void) {
  int seen = 0;
  for (;;) {
    for (volatile unsigned long i = 0; i < 1000000; i++) {
    }
    if (asked != seen) {
      seen = asked;
      map_again(0, lib);
      map_again(1, big);
      if (spelled < 50) {
        char path[8192];
        const char *slash = strrchr(lib, '/');
        int dir = slash ? (int)(slash - lib) : 1;
        int at = snprintf(path, sizeof path, "%.*s/", dir, slash ? lib : ".");
        for (int k = 0; k <= spelled; k++) at += snprintf(path + at, sizeof path - at, "./");
        snprintf(path + at, sizeof path - at, "%s", slash ? slash + 1 : lib);
        spelled++;
        dlopen(path, RTLD_NOW | RTLD_LOCAL); /* fails on bytes that are not a library */
      }
    }
  }
}
int main(int argc, char **argv) {
  if (argc != 3) return 2;
  lib = argv[1];
  big = argv[2];
  alarm(120);
  signal(SIGUSR1, on_usr1);
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  void (*call)(void (*)(void)) = h ? (void (*)(void (*)(void)))dlsym(h, "lib_call") : 0;
  if (!call) {
    fprintf(stderr, "%s\n", dlerror());
    return 3;
  }
  int fd = open(big, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 ||
      mmap(0, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
    return 4;
  close(fd);
  printf("ready\n");
  fflush(stdout);
  call(spin);
  return 0;
}
EOF
cat >mapper.c <<'EOF'
/* mapper SECONDS FILE[@OFFSET]...: maps each file PROT_READ|PROT_EXEC, says how many, then for
 * SECONDS spins in hop(), whose (lying) CFI makes the word it pushed its return address: the
 * address of each file's first bytes, middle, last byte and OFFSET in turn, so the walks step
 * from this program's code into every mapped file. Exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
void hop(unsigned long fake_return, unsigned long spins);
__asm__(".text\n.globl hop\n.type hop,@function\nhop:\n.cfi_startproc\n"
        "push %rdi\n" /* CFA still rsp + 8 by the CFI: the word just pushed is the return address */
        "1: dec %rsi\njnz 1b\n"
        "pop %rdi\nret\n.cfi_endproc\n.size hop, .-hop\n");
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  double end = now() + atof(argv[1]);
  int files = argc - 2, mapped = 0, npcs = 0;
  unsigned long *pcs = calloc((size_t)files * 4, sizeof *pcs);
  for (int i = 0; i < files; i++) {
    char *arg = argv[i + 2], *at = strrchr(arg, '@');
    unsigned long extra = 0;
    if (at) {
      extra = strtoul(at + 1, 0, 0);
      *at = 0;
    }
    int fd = open(arg, O_RDONLY);
    struct stat st;
    if (fd < 0) continue;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      char *p = mmap(0, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        unsigned long size = st.st_size;
        mapped++;
        pcs[npcs++] = (unsigned long)p + (size > 0x40 ? 0x40 : 0);
        pcs[npcs++] = (unsigned long)p + size / 2;
        pcs[npcs++] = (unsigned long)p + size - 1;
        if (at && extra < size) pcs[npcs++] = (unsigned long)p + extra;
      }
    }
    close(fd);
  }
  printf("mapped %d of %d\n", mapped, files);
  fflush(stdout);
  while (now() < end)
    for (int i = 0; i < npcs; i++) hop(pcs[i], 20000);
  return 0;
}
EOF
heredoc "$repo/tests/scripts/test_cfi_bomb.sh" "cat >spin.c <<'EOF'" EOF >spin.c
cat >storm.sh <<'EOF'
#!/bin/sh
# storm.sh N TINY: N programs exec'd one after another, half /bin/true and half TINY; fails if
# one of them did.
n=$1 tiny=$2 i=0 bad=0
while [ "$i" -lt "$n" ]; do
  /bin/true || bad=$((bad + 1))
  "$tiny" || bad=$((bad + 1))
  i=$((i + 2))
done
echo "$i programs, $bad failed"
[ "$bad" = 0 ]
EOF
chmod +x storm.sh
{
  for v in 0 1 2 3; do gcc "${cflags[@]}" -shared -fPIC -DVARIANT=$v -o "lib-v$v.so" lib.c; done
  gcc "${cflags[@]}" -o dlmany dlmany.c -ldl
  gcc "${cflags[@]}" -o tiny tiny.c
  gcc "${cflags[@]}" -o execchain execchain.c
  gcc "${cflags[@]}" -o forkbomb forkbomb.c
  gcc "${cflags[@]}" -o hold hold.c -ldl
  gcc "${cflags[@]}" -o mapper mapper.c
} >setup.log 2>&1 || { echo "kernel-hostile: set-up failed: $(head -5 setup.log)" >&2; exit 2; }
mkdir libs
for ((i = 0; i < 3000; i++)); do cp "lib-v$((i % 4)).so" "libs/lib$i.so"; done

# ---- 1. 3,000 libraries ------------------------------------------------------------------------
if want dlopen-cmd; then
native "$work/dlmany" "$work/libs" 3000 3
if [ "$native_rc" != 0 ]; then
  report dlopen-cmd FAIL "the program fails natively (status $native_rc): $(head -2 native.out)"
else
  run_at 3 dlopen-cmd 90 record --unwind kernel -F 999 -f folded -o "$work/dlopen-cmd.folded" -- \
    "$work/dlmany" "$work/libs" 3000 3
  command_problems # (natively it succeeded: this branch)
  judge dlopen-cmd "$(cmd_limit)" "kmem@3s=${kmem}MiB native=${native_secs}s libs=3000 left=$left" "$problem"
fi
kill_ours
fi

if want dlopen-p; then
start_bg dlmany-p.out "$work/dlmany" "$work/libs" 3000 forever
target=$bg_pid
if ! wait_line dlmany-p.out '^ready' 30; then
  report dlopen-p FAIL "the target did not load its libraries: $(head -2 dlmany-p.out)"
else
  run_at 4 dlopen-p 60 record --unwind kernel -F 999 -p "$target" -d 5 -f folded -o "$work/dlopen-p.folded"
  problem=
  state=alive
  alive "$target" || { state=gone; problem=" the target did not run on;"; }
  judge dlopen-p 10 "kmem@4s=${kmem}MiB target=$state maps=$(wc -l <"/proc/$target/maps" 2>/dev/null || echo 0)" "$problem"
fi
stop_bg "$target"
kill_ours
fi

# ---- 2. exec storms ----------------------------------------------------------------------------
if want storm-cmd; then
native "$work/storm.sh" 2000 "$work/tiny"
run storm-cmd 90 record --unwind kernel -F 999 -f folded -o "$work/storm-cmd.folded" -- \
  "$work/storm.sh" 2000 "$work/tiny"
left=$(leftovers)
problem=
[ "$left" = 0 ] || problem=" $left processes left;"
judge storm-cmd "$(cmd_limit)" "native=${native_secs}s execs=2000 left=$left" "$problem"
kill_ours
fi

if want storm-chain; then
native "$work/execchain" 2000
run storm-chain 90 record --unwind kernel -F 999 -f folded -o "$work/storm-chain.folded" -- \
  "$work/execchain" 2000
command_problems
judge storm-chain "$(cmd_limit)" "native=${native_secs}s execs=2000 left=$left" "$problem"
kill_ours
fi

# The storm on its own, long enough to outlast the 5 s run: 6,000 programs (~2.5x the 2,000
# storm's native time).
if want storm-a; then
start_bg storm-a.out "$work/storm.sh" 6000 "$work/tiny"
storm=$bg_pid
run_at 4 storm-a 30 record --unwind kernel -F 999 -a -d 5 -f folded -o "$work/storm-a.folded"
problem=
state=running
if ! alive "$storm"; then
  state=ended
fi
storm_rc=0
timeout 60 tail --pid="$storm" -f /dev/null || true
wait "$storm" || storm_rc=$?
[ "$storm_rc" = 0 ] || problem=" the storm ended with status $storm_rc: $(tail -1 storm-a.out);"
judge storm-a 10 "kmem@4s=${kmem}MiB storm=$state-after-run,status=$storm_rc ($(tail -1 storm-a.out))" "$problem"
kill_ours
fi

# ---- 3. a bounded fork bomb --------------------------------------------------------------------
if want forkbomb; then
native "$work/forkbomb" 13 3 2000
native_count=$(head -1 native.out || true)
run forkbomb 90 record --unwind kernel -F 999 -f folded -o "$work/forkbomb.folded" -- \
  "$work/forkbomb" 13 3 2000
command_problems
judge forkbomb "$(cmd_limit)" "native=${native_secs}s ($native_count) recorded=($(head -1 forkbomb.out)) left=$left" "$problem"
kill_ours
fi

# ---- 4. files replaced under a running process -------------------------------------------------
if want replace-inplace replace-rename replace-deleted; then
# The largest library here (libLLVM: ~1 million rows, a build of ~1 s).
big_src=
for f in /usr/lib/x86_64-linux-gnu/libLLVM-15.so.1 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 \
  /usr/lib/x86_64-linux-gnu/libstdc++.so.6; do
  [ -f "$f" ] && { big_src=$(readlink -f "$f"); break; }
done
head -c 200000 /dev/urandom >random.bin
# Starts hold on fresh copies (lib.so, big.so): $target.
start_hold() { # NAME
  mkdir -p "$1"
  cp lib-v3.so "$1/lib.so"
  cp "$big_src" "$1/big.so"
  start_bg "$1.hold.out" "$work/hold" "$work/$1/lib.so" "$work/$1/big.so"
  target=$bg_pid
  wait_line "$1.hold.out" '^ready' 20
}
# record -p of the target for 6 s in the background while the caller changes files.
record_bg() { # NAME
  run "$1" 40 record --unwind kernel -F 999 -p "$target" -d 6 -f folded -o "$work/$1.folded" &
  rec=$!
  measure_kmem_at 5 &
  kmem_job=$!
  sleep 1
}
hold_verdict() { # NAME WHAT
  local problem='' state=alive
  alive "$target" || { state=gone; problem=" the target did not run on;"; }
  wait "$kmem_job" || true
  judge "$1" 11 "kmem@5s=$(cat "$work/kmem")MiB target=$state $2" "$problem"
  stop_bg "$target"
  kill_ours
}
if [ -z "$big_src" ]; then
  for a in replace-inplace replace-rename replace-deleted; do report "$a" SKIP "no large library"; done
else
  big_name=$(basename "$big_src")
  d=replace-inplace
  if start_hold $d; then
    record_bg $d
    # The library on the stack: truncated, then random bytes; later another library's bytes.
    : >$d/lib.so
    sleep 0.1
    cat random.bin >$d/lib.so
    kill -USR1 "$target"
    # The large file built again (a new mtime, remapped), then truncated and rewritten while the
    # builder reads it: 4 rounds, 0.05-0.35 s into each build.
    for pause in 0.05 0.15 0.25 0.35; do
      touch $d/big.so
      kill -USR1 "$target"
      sleep "$pause"
      truncate -s 4096 $d/big.so
      sleep 0.05
      cat "$big_src" >$d/big.so
    done
    cat lib-v1.so >$d/lib.so
    kill -USR1 "$target"
    wait "$rec" || true
    load_result $d
    hold_verdict $d "big=$big_name rounds=4"
  else
    report $d FAIL "hold did not start: $(head -2 $d.hold.out)"
  fi

  d=replace-rename
  if start_hold $d; then
    record_bg $d
    # Each round: the library replaced by another valid one, the large file by random bytes
    # and back (remapped and dlopened anew each time), the new files renamed over the old.
    for round in 1 2 3 4; do
      cp "lib-v$((round % 3)).so" $d/lib.so.new
      mv -f $d/lib.so.new $d/lib.so
      cp random.bin $d/big.so.new
      mv -f $d/big.so.new $d/big.so
      kill -USR1 "$target"
      sleep 0.2
      cp "$big_src" $d/big.so.new
      mv -f $d/big.so.new $d/big.so
      kill -USR1 "$target"
      sleep 0.3
    done
    wait "$rec" || true
    load_result $d
    hold_verdict $d "big=$big_name rounds=4 maps=$(grep -c "$d/" "/proc/$target/maps" 2>/dev/null || true)"
  else
    report $d FAIL "hold did not start: $(head -2 $d.hold.out)"
  fi

  d=replace-deleted
  if start_hold $d; then
    # The library on the stack deleted before the run; the large file while the run loads it
    # (deleted and replaced: remapped, its old mapping gone), then deleted for good.
    rm -f $d/lib.so
    record_bg $d
    cp "$big_src" $d/big.so.2
    rm -f $d/big.so
    mv $d/big.so.2 $d/big.so
    kill -USR1 "$target"
    sleep 0.3
    rm -f $d/big.so
    kill -USR1 "$target"
    wait "$rec" || true
    load_result $d
    hold_verdict $d "big=$big_name deleted-maps=$(grep -c '(deleted)' "/proc/$target/maps" 2>/dev/null || true)"
  else
    report $d FAIL "hold did not start: $(head -2 $d.hold.out)"
  fi
fi
fi

# ---- 5. hostile ELF files as mapped files ------------------------------------------------------
if want elf-crafted; then
mkdir -p hostile
crafted=$(python3 "$repo/tests/scripts/crafted_cfi.py" "$work/hostile" 2>/dev/null || echo 0)
for f in "$repo"/fuzz/corpus/*/*; do
  [ -f "$f" ] && cp "$f" "hostile/corpus-$(basename "$(dirname "$f")")-$(basename "$f")"
done
# Mutants of a small library (seeded): bytes changed in its ELF and program headers, its
# section headers, .dynamic, .eh_frame_hdr and .eh_frame; and truncated copies.
cat >mutate.py <<'PY'
import random, struct, sys
data = open(sys.argv[1], 'rb').read()
out = sys.argv[2]
rnd = random.Random(30)
e_phoff, e_shoff = struct.unpack_from('<QQ', data, 0x20)
e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = struct.unpack_from('<HHHHH', data, 0x36)
regions = [(0, 64), (e_phoff, e_phoff + e_phentsize * e_phnum),
           (e_shoff, e_shoff + e_shentsize * e_shnum)]
shstr_off = struct.unpack_from('<Q', data, e_shoff + e_shstrndx * e_shentsize + 0x18)[0]
for i in range(e_shnum):
    name, _, _, _, off, size = struct.unpack_from('<IIQQQQ', data, e_shoff + i * e_shentsize)
    n = data[shstr_off + name:data.index(b'\0', shstr_off + name)]
    if n in (b'.eh_frame_hdr', b'.eh_frame', b'.dynamic') and size:
        regions.append((off, off + size))
count = 0
for k in range(240):
    b = bytearray(data)
    for _ in range(rnd.choice([1, 2, 4, 8, 16])):
        lo, hi = rnd.choice(regions)
        at = rnd.randrange(lo, hi)
        b[at] = rnd.choice([0, 0xff, 0x7f, 0x80, rnd.randrange(256)])
    open(f'{out}/mutant{k}', 'wb').write(b)
    count += 1
sizes = [1, 4, 16, 52, 63, 64, 100, 200, 500, 1000, 2000, 4095, 4096, 4097, len(data) // 4,
         len(data) // 2, len(data) - 100, len(data) - 1]
sizes += [rnd.randrange(64, len(data)) for _ in range(42)]
for k, size in enumerate(sizes):
    open(f'{out}/truncated{k}', 'wb').write(data[:size])
    count += 1
print(count)
PY
mutants=$(python3 mutate.py lib-v3.so hostile || echo 0)
nfiles=$(find hostile -type f | wc -l)
native "$work/mapper" 5 hostile/*
run_at 4 elf-crafted 60 record --unwind kernel -F 999 -f folded -o "$work/elf-crafted.folded" -- \
  "$work/mapper" 5 hostile/*
command_problems
judge elf-crafted "$(cmd_limit)" "kmem@4s=${kmem}MiB files=$nfiles (crafted $crafted, mutants $mutants) native: $(head -1 native.out) stderr-lines=$(wc -l <elf-crafted.err) left=$left" "$problem"
kill_ours
fi

# The 2-million-row compressed .debug_frame bomb, built as test_cfi_bomb.sh builds it.
if want elf-bomb; then
mkdir -p bomb
if python3 "$repo/tests/scripts/cfi_bomb.py" 2000000 >bomb/bomb.S &&
  gcc -O1 -fno-omit-frame-pointer -fno-asynchronous-unwind-tables -o bomb/bomb.big spin.c \
    bomb/bomb.S >bomb/build.log 2>&1 &&
  objcopy --remove-section .eh_frame_hdr --compress-debug-sections bomb/bomb.big bomb/bomb; then
  rm -f bomb/bomb.S bomb/bomb.big
  main_at=$(nm bomb/bomb | awk '$3 == "main" { print "0x" $1 }' || true)
  spin_at=$(nm bomb/bomb | awk '$3 == "spin" { print "0x" $1 }' || true)
  cp bomb/bomb bomb/bomb2
  bombs=("bomb/bomb@$((main_at + 1))" "bomb/bomb2@$((spin_at + 1))")
  for f in "$repo"/fuzz/corpus/elf/*; do
    [ -f "$f" ] && cp "$f" "bomb/$(basename "$f")" && bombs+=("bomb/$(basename "$f")")
  done
  native "$work/mapper" 5 "${bombs[@]}"
  run elf-bomb 60 record --unwind kernel -F 999 -f folded -o "$work/elf-bomb.folded" -- \
    "$work/mapper" 5 "${bombs[@]}"
  bomb_rc=$rc bomb_kb=$kb bomb_secs=$secs
  command_problems
  # And the bomb as a program of its own (main and spin described only by the bomb), with -p.
  start_bg bomb-run.out "$work/bomb/bomb"
  target=$bg_pid
  if wait_line bomb-run.out '^ready' 10; then
    run elf-bomb-p 30 record --unwind kernel -F 999 -p "$target" -d 3 -f folded -o "$work/elf-bomb-p.folded"
    p_line="bomb -p: rc=$rc rss=$((kb >> 10))MB ${secs}s samples=$(sed -n 's/^\([0-9][0-9]*\) samples .*/\1/p' elf-bomb-p.err | head -1)"
    [ "$rc" = 0 ] || problem+=" bomb -p status $rc: $(head -1 elf-bomb-p.err);"
    [ "$kb" -le "$rss_bound_kb" ] || problem+=" bomb -p RSS over bound;"
    le "$secs" 8 || problem+=" bomb -p ${secs}s over 8 s;"
    if grep -m1 -E 'Sanitizer|terminate called|Assertion|Segmentation|Aborted' elf-bomb-p.err >/dev/null; then
      problem+=" bomb -p crashed;"
    fi
    alive "$target" || problem+=" the bomb did not run on;"
    grep -qE ';main;spin [0-9]+$' elf-bomb-p.folded 2>/dev/null || p_line+=" (no main;spin stack)"
  else
    p_line="bomb -p: the bomb did not start"
    problem+=" the bomb did not start;"
  fi
  stop_bg "$target"
  rc=$bomb_rc kb=$bomb_kb secs=$bomb_secs
  judge elf-bomb "$(cmd_limit)" "files=${#bombs[@]} native: $(head -1 native.out) left=$left; $p_line" "$problem"
else
  report elf-bomb FAIL "could not build the bomb: $(tail -2 bomb/build.log)"
fi
kill_ours
fi

# ---- SIGKILL mid-run ---------------------------------------------------------------------------
if want sigkill; then
start_bg sigkill-target.out "$work/dlmany" "$work/libs" 3000 forever
target=$bg_pid
if ! wait_line sigkill-target.out '^ready' 30; then
  report sigkill FAIL "the target did not load its libraries: $(head -2 sigkill-target.out)"
else
  t0=$EPOCHREALTIME
  (
    ulimit -v "$vm_bound_kb"
    exec "$ehelf" record --unwind kernel -F 999 -p "$target" -d 30 -f folded -o "$work/sigkill.folded"
  ) >sigkill.out 2>sigkill.err </dev/null &
  victim=$!
  bg_pids+=("$victim")
  sleep 2.5
  # The check's control: what it would find of this ehelf's now (a program and 3 maps).
  loaded=$(kernel_objects | wc -l || true)
  victim_rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$victim/status" 2>/dev/null || echo 0)
  kmem=$(kernel_mem "$victim")
  kill -KILL "$victim"
  rc=0
  { wait "$victim" || rc=$?; } 2>/dev/null # (no "Killed" line from bash)
  secs=$(since "$t0")
  problem=
  [ "$rc" = 137 ] || problem=" status $rc, not SIGKILL's 137;"
  state=alive
  alive "$target" || { state=gone; problem+=" the target did not run on;"; }
  kernel=clean
  kernel_clean || { kernel="LEFT: $kernel_left"; problem+=" left in the kernel;"; }
  detail="rc=$rc rss-at-kill=$((victim_rss >> 10))MB kmem-at-kill=${kmem}MiB ${secs}s objects-seen-before-kill=$loaded target=$state kernel=$kernel"
  if [ -z "$problem" ]; then report sigkill PASS "$detail"; else report sigkill FAIL "$detail; FAILED:$problem"; fi
fi
stop_bg "$target"
kill_ours
fi

echo "kernel-hostile: $npass passed, $nfail failed, $nskip skipped in $(since "$start") s"
[ "$nfail" = 0 ]
