#!/usr/bin/env bash
# (One file of 760 lines: a campaign of self-contained attacks sharing one set-up, read case by case.)
# The third round of hostile inputs (row bombs, output paths, setuid, memory windows) at full
# scale, one at a time, against a release build: each attack prints one line, NAME PASS|FAIL|SKIP and what was
# measured (peak RSS from /usr/bin/time -f %M, seconds, exit status, the error line). Every ehelf
# run is under `ulimit -v` (the whole script under a 6 GiB soft limit) and `timeout`.
#
#   bomb-*      an 87-million-row compressed .debug_frame (250 MiB decompressed, zlib and zstd)
#               through stats, dump, verify, the same under 64-256 MB, and stack -p, record -p,
#               record -a while the program runs (cfi_bomb.py, spin.c of test_cfi_bomb.sh)
#   fdes-*      the same rows in 1,933 FDEs, each within the per-FDE limits: stats, verify,
#               compile, stack -p, record -p
#   out-*       compile -o, synth -o, synth --patch, record -o, check --record, perf -o aimed at
#               a /dev/null and a /dev/full (mknod copies when root), a FIFO, a symbolic link
#   race-*      synth --patch of a 6755 input while OUT is swapped with a symlink to a 0600 file
#               by renameat2(RENAME_EXCHANGE), 100 runs
#   setuid-*    setuid and setgid copies of ehelf run by nobody: record/check -- id, synth -o
#   perf-*      perf.data without FINISHED_ROUND: 1 and 4 compressed records of 4 MiB of
#               records, a 60 MiB and a 120 MiB chunk, 16 MiB of plain records from a file and a
#               pipe (written here as tests/unit/perf_recording.hpp lays perf.data out)
#   replay-*    check --replay: 20 and 100 records naming libLLVM (trace.py of
#               test_replay_bounds.sh), a module path with a newline and terminal escapes, a
#               module image that is not ELF
#   synth-*     1 MB and 25 MB of nops in one function, a 5,000-function noreturn chain
#               (test_synth_bounds.sh's generators), an unencodable row (synth_odd_save.S) and
#               random .text
#   check-*     clone(CLONE_VM) without vfork (6 runs), self-modifying code, the program's own
#               SIGTRAP and SIGSTOP, SIGTERM/SIGINT 20 times on a busy program, --max-steps
#   capi-*      200 walks across dlclose/dlopen at a reused address, walks on an 8 KiB sigaltstack
#   compile-*   a hard RLIMIT_AS below 4 GiB
#   perf-unmapped  tests/scripts/test_perf_unmapped_process.sh
#
# Usage: scripts/hostile-rerun.sh [BUILD_DIR]   (default: build; a release build: a sanitizer
# build cannot run under ulimit -v, exit 77). Root runs everything; others get SKIP lines for
# the parts that need root (device copies, the setuid copies) or perf_event_open.
# Exit status: 0 if no attack failed, 1 if one did. All temporary files (and every setuid copy)
# are removed on exit, also when interrupted.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tests="$repo/tests"
build_arg=${1:-build}
if [ ! -x "$build_arg/bin/ehelf" ]; then
  echo "hostile-rerun: no ehelf at $build_arg/bin/ehelf" >&2
  exit 2
fi
for tool in gcc cc objcopy objdump readelf python3 zstd /usr/bin/time timeout; do
  command -v "$tool" >/dev/null || { echo "hostile-rerun: needs $tool" >&2; exit 2; }
done
build_dir=$(cd "$build_arg" && pwd)
# $ehelf, $work (a private temporary directory), $sanitized, build_id, perf_record.
# shellcheck source=../tests/scripts/common.sh
source "$tests/scripts/common.sh" "$build_dir"
set -euo pipefail # common.sh sets -uo pipefail only

# Cleanup: the processes started here (by pid), every setuid or setgid file, the work directory.
bg_pids=()
cleanup() {
  local pid
  for pid in "${bg_pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -d "$work" ] && find "$work" -type f -perm /6000 -exec rm -f {} + 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$sanitized" = 1 ]; then
  echo "SKIP all: $ehelf is a sanitizer build, which cannot run under ulimit -v"
  exit 77
fi
ulimit -S -v $((6 << 20)) # nothing here may take more than 6 GiB of address space
cd "$work"
start=$EPOCHREALTIME
root=0
[ "$(id -u)" = 0 ] && root=1
# ---- helpers -----------------------------------------------------------------------------------

CAMPAIGN_NAME_WIDTH=24
source "$repo/scripts/campaign-lib.sh"
# The first line of FILE (or the one matching PATTERN), control bytes shown (cat -v), the
# work directory's path left out, cut.
line_of() { # FILE [PATTERN]
  if [ -n "${2:-}" ]; then grep -E -m1 -- "$2" "$1" 2>/dev/null; else head -1 "$1"; fi |
    cat -v | sed "s|$work/||g" | cut -c1-170 || true
}
# ehelf ARGS... under `ulimit -v KB` and `timeout SECONDS`, stdin from /dev/null: status in $rc,
# peak RSS in KB in $kb, wall seconds in $secs.
run() { # KB SECONDS OUT ERR ARGS...
  local limit=$1 seconds=$2 out=$3 err=$4
  shift 4
  run_bounded "$limit" "$seconds" "$out" "$err" "$work/rss" "$@"
}
killed() { [ "$rc" -ge 124 ]; } # a timeout, a signal (SIGABRT: 134), not an exit of its own
lines() { wc -l <"$1" | tr -d ' '; }
# The body of the quoted here-document that starts on the first line of FILE containing START
# and ends at a line equal to TAG: the test's generator, reused as it is.
start_bg() { # COMMAND...: started in the background, its pid in $bg_pid (killed at exit)
  "$@" &
  bg_pid=$!
  bg_pids+=("$bg_pid")
}
stop_bg() { kill -KILL "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
alive() { # PID: exists and is not a zombie
  local s
  s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || true
  [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}
pids_in() { sed -n 's/^pid \([0-9]*\)$/\1/p' "$1"; } # the "pid N" lines of a check fixture
have_record=0
"$ehelf" record -q -d 0.2 -f folded -o probe.folded -- true >/dev/null 2>&1 && have_record=1
rm -f probe.folded

# ---- High: an 87-million-row compressed .debug_frame bomb -------------------------------------
# cfi_bomb.py's FDEs with their `.rept N` row written as one `.fill N, 3, 0x100e41` (the same
# three bytes, DW_CFA_advance_loc 1; DW_CFA_def_cfa_offset 16): gas expands a .rept in memory,
# about 6 GB for 87 million lines. spin.c is test_cfi_bomb.sh's (spin called from main, frame
# pointers, no .eh_frame of its own).
heredoc "$tests/scripts/test_cfi_bomb.sh" "cat >spin.c <<'EOF'" EOF >spin.c
make_bomb() { # NAME ROWS-PER-FDE FDES: NAME-zlib and NAME-zstd
  python3 "$tests/scripts/cfi_bomb.py" "$2" "$3" | python3 -c '
import re, sys
s, n = re.subn(r"\t\.rept (\d+)\n\t\.byte 0x41, 0x0e, 0x10[^\n]*\n\t\.endr",
               lambda m: "\t.fill %s, 3, 0x100e41" % m.group(1), sys.stdin.read())
sys.exit("cfi_bomb.py: no .rept row to rewrite") if n != int(sys.argv[1]) else sys.stdout.write(s)' "$3" >"$1.S"
  gcc -O1 -fno-omit-frame-pointer -fno-asynchronous-unwind-tables -o "$1.big" spin.c "$1.S"
  for z in zlib zstd; do
    objcopy --remove-section .eh_frame_hdr --compress-debug-sections=$z "$1.big" "$1-$z"
  done
  rm -f "$1.big" "$1.S"
}
# The issue's bomb: one FDE of 87 million rows.
make_bomb bomb 87000000 1
bomb_kb=$((512 << 10)) # the 256 MiB decompression cap plus the rest: before, 1.2-9.5 GB and SIGABRT
bomb_sizes="zlib $(stat -c %s bomb-zlib) B, zstd $(stat -c %s bomb-zstd) B, 87000000 rows"
for z in zlib zstd; do
  f=bomb-$z
  refusal="$f: \\.debug_frame\\+0x[0-9a-f]+: .*: refused"
  run $((2 << 20)) 120 stats.out stats.err stats --no-progress "$f"
  ok=1
  { killed || [ "$kb" -gt $bomb_kb ] || [ "$(grep -cE "$refusal" stats.out)" != 1 ]; } && ok=0
  verdict "bomb-stats-$z" $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s ($bomb_sizes): $(line_of stats.out "$refusal")$(line_of stats.err)"
  run $((2 << 20)) 120 dump.out dump.err dump "$f"
  ok=1
  { [ $rc != 1 ] || [ "$kb" -gt $bomb_kb ] || [ "$(lines dump.err)" != 1 ] ||
    ! grep -qE "warning: $f: \\.debug_frame\\+0x[0-9a-f]+: more than [0-9]+ rows" dump.err; } && ok=0
  verdict "bomb-dump-$z" $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s $(lines dump.out) lines: $(line_of dump.err)"
  run $((2 << 20)) 120 verify.out verify.err verify "$f"
  ok=1
  { [ $rc != 2 ] || [ "$kb" -gt $bomb_kb ] || [ "$(lines verify.err)" != 1 ] ||
    ! grep -qE "$refusal" verify.err; } && ok=0
  verdict "bomb-verify-$z" $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s: $(line_of verify.err)"
done
# Below what the decompressed section takes: every run ends by itself, any error in lines that
# start with "ehelf: " (no uncaught bad_alloc, no SIGABRT).
runs=0 oom=0 worst=""
for limit in 65536 131072 196608 262144; do
  for cmd in "stats --no-progress" dump verify; do
    # shellcheck disable=SC2086 # the command's words
    run $limit 120 oom.out oom.err $cmd bomb-zlib
    runs=$((runs + 1))
    grep -q 'out of memory' oom.err && oom=$((oom + 1))
    if killed || grep -qv '^ehelf: ' oom.err; then
      worst="${cmd%% *} under $limit KB: rc=$rc $(line_of oom.err)"
    fi
  done
done
if [ -z "$worst" ] && [ $oom -gt 0 ]; then
  report bomb-under-ulimit PASS "$runs runs under 64-256 MB: $oom 'ehelf: out of memory' (one line, rc=2), none killed"
else
  report bomb-under-ulimit FAIL "${worst:-no run ran out of memory: the limits prove nothing}"
fi
# The program running: stack and record unwind it by frame pointers and go on. Samples whose
# stack reaches main, of all the program's (the first ones, taken while ehelf still loads the
# tables, end in spin: "process not loaded yet").
share() { # FOLDED COMM
  awk -v comm="$2" 'index($0, comm ";") == 1 { n += $NF; if (/;main;spin [0-9]+$/) m += $NF }
    END { printf "%d of %d samples reach main", m, n }' "$1"
}
running() { # PREFIX PROGRAM RSS-BOUND-KB: stack -p, record -p and (PREFIX bomb) record -a
  local prefix=$1 program=$2 bound=$3 pid
  start_bg "./$program" >running.out
  pid=$bg_pid
  for _ in $(seq 200); do grep -q ready running.out && break; sleep 0.05; done
  run $((2 << 20)) 120 stack.out stack.err stack -p "$pid"
  ok=1
  { killed || [ "$kb" -gt "$bound" ] || ! grep -qE ' spin$' stack.out || ! grep -qE ' main$' stack.out; } && ok=0
  verdict "$prefix-stack-p" $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s: $(grep -cE '^#' stack.out) frames, spin and main: $(grep -cE ' (spin|main)$' stack.out)/2 $(line_of stack.err)"
  if [ $have_record = 0 ]; then
    report "$prefix-record" SKIP "perf_event_open refused here"
  else
    run $((4 << 20)) 120 rec.out rec.err record -q -p "$pid" -d 1 -f folded -o rec.folded
    ok=1
    { killed || [ "$kb" -gt "$bound" ] || ! grep -qE "^$program;.*;main;spin [0-9]+\$" rec.folded; } && ok=0
    verdict "$prefix-record-p" $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s: $(share rec.folded "$program") $(line_of rec.err)"
    if [ "$prefix" = bomb ]; then
      run $((4 << 20)) 120 rec.out rec.err record -q -a -d 2 -f folded -o all.folded
      ok=1
      { killed || [ "$kb" -gt $((1 << 20)) ] || ! grep -qE "^$program;.*;main;spin [0-9]+\$" all.folded; } && ok=0
      verdict "$prefix-record-a" $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s (bound 1 GB): $(share all.folded "$program") $(line_of rec.err)"
    fi
  fi
  stop_bg "$pid"
  rm -f rec.folded all.folded
}
running bomb bomb-zlib $bomb_kb
rm -f bomb-zlib bomb-zstd dump.out
# A variant: the same 87 million rows in 1,933 FDEs of 45,000 rows, each within the limits on
# one FDE, so that only the module's limit (4,000,000 rows) can refuse the table. Bound: the
# 256 MiB section plus a table at the limits (~160 MB, twice that while it grows).
make_bomb fdes 45000 1933
fdes_kb=$((768 << 10))
fdes_refusal='fdes-zlib: \.debug_frame\+0x[0-9a-f]+: more than 4000000 rows in the module'
run $((2 << 20)) 120 stats.out stats.err stats --no-progress fdes-zlib
ok=1
{ killed || [ "$kb" -gt $fdes_kb ] || ! grep -qE "$fdes_refusal" stats.out stats.err; } && ok=0
verdict fdes-stats $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s ($(stat -c %s fdes-zlib) B): $(grep -oE '[0-9]+ FDEs \([0-9]+ empty, [0-9]+ rejected\), [0-9]+ rows' stats.out || true) $(line_of stats.out refused)$(line_of stats.err)"
run $((2 << 20)) 120 verify.out verify.err verify fdes-zlib
ok=1
{ [ $rc != 2 ] || [ "$kb" -gt $fdes_kb ] || [ "$(lines verify.err)" != 1 ] || ! grep -qE "$fdes_refusal" verify.err; } && ok=0
verdict fdes-verify $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s: $(line_of verify.err)"
run $((4 << 20)) 300 compile.out compile.err compile fdes-zlib -o fdes.so
ok=1
{ [ $rc = 0 ] || killed || [ "$kb" -gt $fdes_kb ] || [ "$(lines compile.err)" != 1 ] || ! grep -qE "$fdes_refusal" compile.err; } && ok=0
verdict fdes-compile $((1 - ok)) "rc=$rc $(mb "$kb") ${secs}s: $(line_of compile.err)"
running fdes fdes-zlib $fdes_kb
rm -f fdes-zlib fdes-zstd fdes.so

# ---- High: outputs at device nodes, FIFOs and symbolic links ----------------------------------
heredoc "$tests/scripts/test_hostile_outputs.sh" "cat > prog.c <<'EOF'" EOF >prog.c
cc -O1 -g -o prog prog.c
have_perf_data=0
command -v perf >/dev/null &&
  perf_record -q -e cpu-clock -F 999 -g -o perf.data -- ./prog spin >/dev/null 2>&1 &&
  have_perf_data=1
out_commands=("compile prog -o OUT" "synth prog -o OUT" "synth prog --patch OUT"
              "check --record OUT -- ./prog" "record -q -f folded -o OUT -- ./prog spin"
              "perf perf.data -o OUT")
leftovers() { find "$1" -maxdepth 1 -name '.ehelf-*' | wc -l; }
for cmd in "${out_commands[@]}"; do
  name=${cmd%% *}
  case $cmd in
    *--patch*) name=synth-patch ;; synth*) name=synth-o ;; check*) name=check-record ;;
  esac
  if [ "$name" = record ] && [ $have_record = 0 ]; then
    report "out-$name" SKIP "perf_event_open refused here"; continue
  fi
  if [ "$name" = perf ] && [ $have_perf_data = 0 ]; then
    report "out-$name" SKIP "perf record does not work here"; continue
  fi
  d="$work/out-$name"
  mkdir -p "$d"
  if [ $root = 1 ]; then # copies, so that a regression cannot replace the machine's devices
    mknod -m 0666 "$d/null" c 1 3
    mknod -m 0666 "$d/full" c 1 7
    null=$d/null full=$d/full
  else
    null=/dev/null full=/dev/full
  fi
  mkfifo "$d/fifo"
  printf 'precious\n' >"$d/target"
  chmod 0600 "$d/target"
  ln -s "$d/target" "$d/link"
  results="" bad="" said=""
  for target in null full fifo link; do
    case $target in null) path=$null ;; full) path=$full ;; *) path=$d/$target ;; esac
    # shellcheck disable=SC2086 # the command's words
    run $((4 << 20)) 60 o.out o.err ${cmd//OUT/$path}
    ok=1
    case $target in
      null) { [ $rc = 0 ] && [ -c "$path" ] && [ "$(stat -c %t:%T "$path")" = 1:3 ]; } || ok=0 ;;
      full) { [ $rc != 0 ] && ! killed && [ "$(lines o.err)" = 1 ] && grep -q 'No space left' o.err &&
              [ -c "$path" ] && [ "$(stat -c %t:%T "$path")" = 1:7 ]; } || ok=0 ;;
      fifo) { [ $rc != 0 ] && ! killed && [ "$(lines o.err)" = 1 ] && [ -p "$path" ]; } || ok=0 ;;
      link) { [ $rc != 0 ] && ! killed && [ "$(lines o.err)" = 1 ] && [ -L "$path" ] &&
              [ "$(cat "$d/target")" = precious ] && [ "$(stat -c %a "$d/target")" = 600 ]; } || ok=0 ;;
    esac
    [ "$(leftovers "$d")" = 0 ] || ok=0
    [ $target = null ] || said+="$target: $(line_of o.err | sed 's/^ehelf: //' | cut -c1-60); "
    if [ $ok = 1 ]; then
      results+="$target:rc=$rc "
    else
      bad+="$target: rc=$rc now '$(stat -c %F "$path" 2>&1)' $(line_of o.err); "
    fi
  done
  if [ -z "$bad" ]; then
    report "out-$name" PASS "${results}| $said"
  else
    report "out-$name" FAIL "$bad"
  fi
  rm -rf "$d"
done

# ---- High: synth --patch raced with renameat2(RENAME_EXCHANGE) --------------------------------
# OUT (a regular file) and LINK (a symbolic link to a root-only 0600 file) are swapped without
# pause while `synth --patch OUT` writes a 6755 input's copy, 100 times: the 0600 file must keep
# its mode and bytes, no file may get a setuid or setgid bit.
cat >racer.c <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  for (;;) syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], 2 /* RENAME_EXCHANGE */);
}
EOF
cc -O1 -o racer racer.c
mkdir -p race vault
chmod 0700 vault
printf 'secret\n' >vault/secret
chmod 0600 vault/secret
cp prog suid-prog
chmod 6755 suid-prog
printf 'old\n' >race/out
ln -s "$work/vault/secret" race/link
start_bg ./racer race/out race/link
racer=$bg_pid
written=0 refused=0 killed_runs=0 other=""
t0=$EPOCHREALTIME
for _ in $(seq 100); do
  run $((4 << 20)) 60 r.out r.err synth suid-prog --patch race/out
  if killed; then
    killed_runs=$((killed_runs + 1))
  elif [ $rc = 0 ]; then
    written=$((written + 1))
  elif grep -q 'symbolic link' r.err; then
    refused=$((refused + 1))
  else
    other="rc=$rc $(line_of r.err)"
  fi
  # Both names back for the next run (the rename over OUT may have taken the link's place).
  rm -f race/out race/link
  printf 'old\n' >race/out
  ln -s "$work/vault/secret" race/link
done
stop_bg "$racer"
marked=$(find "$work" -type f -perm /6000 ! -path "$work/suid-prog" | head -3 | tr '\n' ' ' || true)
ok=1
{ [ $killed_runs != 0 ] || [ -n "$marked" ] || [ "$(stat -c %a vault/secret)" != 600 ] ||
  [ "$(cat vault/secret)" != secret ] || [ $((written + refused)) = 0 ]; } && ok=0
verdict race-patch-exchange $((1 - ok)) "100 runs in $(since "$t0")s: $written written, $refused refused a link, $killed_runs killed; secret $(stat -c %a vault/secret) '$(head -c 10 vault/secret | tr -d '\n')'; setuid files: ${marked:-none} ${other}"
rm -f suid-prog
rm -rf race

# ---- High: a setuid or setgid ehelf run by nobody ---------------------------------------------
if [ $root = 1 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  chmod 0755 "$work"
  priv=$work/priv
  mkdir -p "$priv/root-only"
  chmod 0755 "$priv"
  chmod 0700 "$priv/root-only"
  cp prog "$priv/prog"
  chmod 0755 "$priv/prog"
  as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  for copy in suid:4755 sgid:2755; do
    bin=$priv/ehelf-${copy%%:*}
    cp "$ehelf" "$bin"
    chmod "${copy#*:}" "$bin"
    bad="" results=""
    for cmd in "record -q -f folded -o $priv/root-only/rec -- /usr/bin/id" "check -- /usr/bin/id" \
      "synth $priv/prog -o $priv/root-only/out"; do
      rc=0
      # shellcheck disable=SC2086 # the command's words
      (ulimit -v $((4 << 20)) && exec timeout 60 "${as_nobody[@]}" "$bin" $cmd) \
        >s.out 2>s.err </dev/null || rc=$?
      if [ $rc != 0 ] && [ "$rc" -lt 124 ] && [ "$(lines s.err)" = 1 ] &&
        grep -q 'setuid or setgid' s.err && ! grep -q 'uid=' s.out &&
        [ -z "$(ls -A "$priv/root-only")" ]; then
        results+="${cmd%% *}:rc=$rc "
      else
        bad+="${cmd%% *}: rc=$rc out '$(line_of s.out)' err '$(line_of s.err)' root-only: $(ls "$priv/root-only" | tr '\n' ' '); "
      fi
    done
    rm -f "$bin" # never left behind
    if [ -z "$bad" ]; then
      report "setuid-${copy%%:*}-nobody" PASS "${results}$(line_of s.err)"
    else
      report "setuid-${copy%%:*}-nobody" FAIL "$bad"
    fi
  done
  rm -rf "$priv"
  chmod 0700 "$work"
else
  report setuid-nobody SKIP "needs root, setpriv and the user nobody"
fi
left=$(find "$work" -type f -perm /6000 | wc -l)
verdict setuid-none-left "$left" "$left setuid or setgid files left in the work directory"

# ---- Medium: perf.data memory amplification ---------------------------------------------------
# Records without FINISHED_ROUND: a comm record with a time and 15 header-only records (type 79,
# 8 bytes: a Record costs ~190 bytes in memory) repeated; compressed with zstd into
# PERF_RECORD_COMPRESSED records. Bounds: what an empty recording takes plus the reordering
# window's 128 MiB (RecordStream.MemoryIsBoundedWithoutRounds' bound); for one large chunk plus
# 2 x 64 MiB (the reader's cap on one compressed record, held twice while it is cut into records).
cat >perfgen.py <<'EOF'
import struct, subprocess, sys
# perf.data as tests/unit/perf_recording.hpp lays it out: file layout (104-byte header, an id
# array, one attribute, the data) or pipe layout (16-byte header, PERF_RECORD_HEADER_ATTR).
IP, TID, TIME, PERIOD, CALLCHAIN, REGS_USER, STACK_USER = 1, 2, 4, 256, 32, 1 << 12, 1 << 13
SAMPLE_TYPE = IP | TID | TIME | PERIOD | CALLCHAIN | REGS_USER | STACK_USER
REGS = (1 << 1) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 23)  # bx bp sp ip r15
MiB = 1 << 20
def attr():  # perf_event_attr, 112 bytes: cpu-clock, freq, sample_id_all
    return struct.pack('<IIQQQQQIIQQQQIIQIHH', 1, 112, 0, 4000, SAMPLE_TYPE, 0,
                       (1 << 10) | (1 << 18), 0, 0, 0, 0, 0, REGS, 64, 0, 0, 0, 0, 0)
def record(typ, body):
    return struct.pack('<IHH', typ, 0, 8 + len(body)) + body
def comm(time):  # PERF_RECORD_COMM of pid 1 "c", its sample_id trailer: pid, tid, time
    return record(3, struct.pack('<II', 1, 1) + b'c'.ljust(8, b'\0') + struct.pack('<IIQ', 1, 1, time))
def records(size, time):
    unit = comm(time) + record(79, b'') * 15
    return unit * (size // len(unit) + 1)
def compressed(plain):  # one zstd stream, cut into PERF_RECORD_COMPRESSED records
    z = subprocess.run(['zstd', '-q', '-19', '-c'], input=plain, capture_output=True,
                       check=True).stdout
    return b''.join(record(81, z[i:i + 65000]) for i in range(0, len(z), 65000))
def file_layout(data):
    attrs = attr() + struct.pack('<QQ', 104, 8)
    head = b'PERFILE2' + struct.pack('<8Q', 104, 128, 112, len(attrs), 112 + len(attrs),
                                     len(data), 0, 0) + bytes(32)
    return head + struct.pack('<Q', 101) + attrs + data
def pipe_layout(data):
    return b'PERFILE2' + struct.pack('<Q', 16) + record(64, attr() + struct.pack('<Q', 101)) + data
kind, out = sys.argv[1], sys.argv[2]
data = {'empty': lambda: records(4096, 1000),
        'z4': lambda: compressed(records(4 * MiB, 1000)),
        'z4x4': lambda: b''.join(compressed(records(4 * MiB, 1000 + i)) for i in range(4)),
        'z60': lambda: compressed(records(60 * MiB, 1000)),
        'z120': lambda: compressed(records(120 * MiB, 1000)),
        'plain16': lambda: b''.join(records(4 * MiB, 2000 + i) for i in range(4))}[kind]()
layout = pipe_layout if sys.argv[3:] == ['--pipe'] else file_layout
open(out, 'wb').write(layout(data))
EOF
# ehelf perf reading FILE, or (with --pipe) its bytes from a pipe.
perf_run() { # FILE [--pipe]
  local t0=$EPOCHREALTIME
  rc=0
  if [ "${2:-}" = --pipe ]; then # standard input a pipe, as from `perf record -o -`
    (ulimit -v $((4 << 20)) &&
      exec /usr/bin/time -f '%M' -o "$work/rss" timeout -k 5 120 "$ehelf" perf -v -) \
      >p.out 2>p.err < <(cat "$1") || rc=$?
  else
    (ulimit -v $((4 << 20)) &&
      exec /usr/bin/time -f '%M' -o "$work/rss" timeout -k 5 120 "$ehelf" perf -v "$1") \
      >p.out 2>p.err </dev/null || rc=$?
  fi
  secs=$(since "$t0")
  kb=$(tail -1 "$work/rss" 2>/dev/null || true)
  case $kb in '' | *[!0-9]*) kb=0 ;; esac
}
python3 perfgen.py empty empty.data
perf_run empty.data
base_kb=$kb
for spec in "z4:one compressed record of 4 MiB of records:503 MB" \
  "z4x4:four compressed records of 4 MiB:1.37 GB" \
  "z60:one compressed record of a 60 MiB chunk:SIGABRT at 2.48 GB" \
  "z120:one compressed record of a 120 MiB chunk:-" \
  "plain16:16 MiB of plain records, a file:1.26 GB" \
  "plain16 --pipe:16 MiB of plain records, a pipe:1.26 GB"; do
  IFS=: read -r kind what before <<<"$spec"
  file=${kind%% *}
  pipe=${kind#"$file"}
  # shellcheck disable=SC2086 # --pipe or nothing
  python3 perfgen.py "$file" "$file.data" $pipe
  # shellcheck disable=SC2086
  perf_run "$file.data" $pipe
  bound=$((base_kb + (128 << 10)))
  case $file in z60 | z120) bound=$((base_kb + (256 << 10))) ;; esac
  ok=1
  if [ "$file" = z120 ]; then # over the 64 MiB cap on one chunk: one line, exit 1
    { [ $rc != 1 ] || ! grep -q 'expands beyond' p.err; } && ok=0
    err=$(line_of p.err 'expands beyond')
  else
    [ $rc = 0 ] || ok=0
    err=$(line_of p.err '^ehelf: [^0-9]')
  fi
  { killed || [ "$kb" -gt $bound ]; } && ok=0
  verdict "perf-$file${pipe:+-pipe}" $((1 - ok)) "$(stat -c %s "$file.data") B, $what: rc=$rc $(mb "$kb") (bound $(mb $bound), before: $before) ${secs}s $err"
  [ -z "$pipe" ] || rm -f "$file.data"
done
rm -f ./*.data

# ---- Medium and Low: check --replay -------------------------------------------------------------
heredoc "$tests/scripts/test_replay_bounds.sh" "cat >trace.py <<'EOF'" EOF >trace.py
lib=/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1 # the issue's
[ -f "$lib" ] || lib=$(ls /usr/lib/x86_64-linux-gnu/libLLVM-*.so.1 2>/dev/null | sort -V | tail -1 || true)
[ -n "$lib" ] || lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
id=$(build_id "$lib")
python3 trace.py once.trace "$lib" "$id" 1
run $((4 << 20)) 300 t.out t.err check --replay once.trace
once_kb=$kb
for n in 20 100; do
  python3 trace.py many.trace "$lib" "$id" $n
  run $((4 << 20)) 300 t.out t.err check --replay many.trace
  ok=1
  { [ $rc != 0 ] || [ "$kb" -gt $((once_kb * 3 / 2 + 16384)) ]; } && ok=0
  verdict "replay-$(basename "$lib" .so.1)-$n" $((1 - ok)) "$n records ($(stat -c %s many.trace) B): rc=$rc $(mb "$kb") ${secs}s, one record $(mb "$once_kb") (before: 20 took 914 MB, 100 bad_alloc) $(line_of t.err)"
done
python3 trace.py hostile.trace $'/nonexistent/a\nb\x1b[31mc\x1b]0;pwned\x07d\re' "$id" 1
run $((4 << 20)) 60 t.out t.err check --replay hostile.trace
ok=1
{ [ $rc = 0 ] || killed || [ "$(lines t.err)" != 1 ] || LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' t.err t.out ||
  ! grep -qF 'a\x0ab\x1b[31mc\x1b]0;pwned\x07d\x0de' t.err; } && ok=0
verdict replay-path-escapes $((1 - ok)) "rc=$rc $(lines t.err) line: $(line_of t.err)"
python3 trace.py image.trace --image '[vdso]' "$id" 1
run $((4 << 20)) 60 t.out t.err check --replay image.trace
ok=1
{ [ $rc = 0 ] || killed || ! grep -qE '^ehelf: check: image\.trace: offset 0xa: module image \[vdso\]' t.err; } && ok=0
verdict replay-bad-image $((1 - ok)) "rc=$rc: $(line_of t.err)"
rm -f ./*.trace

# ---- Medium and Low: synth ---------------------------------------------------------------------
eval "$(sed -n '/^nop_program() {/,/^}/p' "$tests/scripts/test_synth_bounds.sh")" # its generator
[ "$(type -t nop_program)" = function ] || { echo "hostile-rerun: no nop_program in test_synth_bounds.sh" >&2; exit 2; }
nop_program nops1m 1000000
run $((4 << 20)) 120 n.out n.err synth nops1m -o nops1m.out
ok=1
{ [ $rc != 0 ] || [ "$kb" -gt $((400 << 10)) ] || [ ! -s nops1m.out ]; } && ok=0
verdict synth-nops-1MB $((1 - ok)) "rc=$rc $(mb "$kb") (bound 400 MB; before 722 MB) ${secs}s $(line_of n.err)"
nop_program nops25m 25000000
run $((4 << 20)) 120 n.out n.err synth nops25m -o nops25m.out
ok=1
{ [ $rc != 2 ] || [ "$kb" -gt $((800 << 10)) ] || [ "$(lines n.err)" != 1 ] ||
  ! grep -q 'more than .* instructions to analyse' n.err || [ -e nops25m.out ]; } && ok=0
verdict synth-nops-25MB $((1 - ok)) "rc=$rc $(mb "$kb") (bound 800 MB; before SIGABRT) ${secs}s: $(line_of n.err)"
rm -f nops1m* nops25m*
heredoc "$tests/scripts/test_synth_bounds.sh" 'python3 - "$work/chain.S" <<' PY >chain.py
heredoc "$tests/scripts/test_synth_bounds.sh" 'python3 - "$work/chain.out" "$after" <<' PY >chain_check.py
python3 chain.py chain.S
gcc -o chain chain.S
run $((4 << 20)) 300 c.out c.err synth chain -o chain.out
after=$(objdump -d --no-show-raw-insn chain | awk '/<f0>:/ { f = 1; next } f && /call/ { c = 1; next } c { sub(":", "", $1); print $1; exit }' || true)
ok=1 why=""
if [ $rc != 0 ] || awk -v s="$secs" 'BEGIN { exit !(s > 10) }'; then
  ok=0
elif ! why=$(python3 chain_check.py chain.out "$after" 2>&1); then
  ok=0 why="f0's add has a row: $(echo "$why" | tail -1)"
fi
verdict synth-noreturn-5000 $((1 - ok)) "rc=$rc ${secs}s (bound 10 s; before 110 s) $(mb "$kb") $why$(line_of c.err)"
rm -f chain*
gcc -o odd_save "$tests/fixtures/synth_odd_save.S"
run $((4 << 20)) 60 s.out s.err synth odd_save -o odd.out --patch odd.patched
ok=1
{ [ $rc != 0 ] || [ "$(lines s.err)" != 1 ] || ! grep -q 'cannot encode the row' s.err ||
  [ ! -s odd.out ] || ! ./odd.patched >/dev/null; } && ok=0
verdict synth-unencodable-row $((1 - ok)) "rc=$rc, -o and --patch written, the patched copy runs: $(line_of s.err)"
# Random .text: 20 files of 1,024 functions of 256 random bytes each, through -o and --patch.
cat >random_text.py <<'EOF'
import random, sys
r = random.Random(int(sys.argv[1]))
out = ['\t.text']
for i in range(1024):
    body = ','.join(str(r.getrandbits(8)) for _ in range(256))
    out.append(f'\t.globl f{i}\n\t.type f{i}, @function\nf{i}:\n\t.byte {body}\n\t.size f{i}, .-f{i}')
out.append('\t.globl main\n\t.type main, @function\nmain:\n\txorl %eax, %eax\n\tret\n\t.size main, .-main')
out.append('\t.section .note.GNU-stack,"",@progbits')
print('\n'.join(out))
EOF
warnings=0 worst="" t0=$EPOCHREALTIME
for seed in $(seq 20); do
  python3 random_text.py "$seed" >rnd.S
  gcc -o rnd rnd.S
  run $((4 << 20)) 120 s.out s.err synth rnd -o rnd.out --patch rnd.patched
  warnings=$((warnings + $(grep -c 'cannot encode' s.err || true)))
  if [ $rc != 0 ] || [ ! -s rnd.out ] || [ ! -s rnd.patched ] || grep -qv 'warning: ' s.err; then
    worst="seed $seed: rc=$rc $(line_of s.err)"
  fi
  rm -f rnd.out rnd.patched
done
verdict synth-random-text "$([ -z "$worst" ] && echo 0 || echo 1)" "20 files in $(since "$t0")s: all written, $warnings rows left out with a warning ${worst}"
rm -f rnd* odd*

# ---- Medium: check on hostile programs ----------------------------------------------------------
fx=$tests/fixtures
gcc -O1 -o clone_vm "$fx/check_clone_vm.c"
gcc -O1 -o own_signals "$fx/check_own_signals.c"
gcc -O2 -I"$fx" -o self_modify "$fx/check_self_modify.S"
gcc -O1 -o busy "$fx/check_busy.c"
good=0 bad=""
for round in 1 2 3 4 5 6; do
  run $((4 << 20)) 120 k.out k.err check --follow-fork -- ./clone_vm
  if [ $rc = 0 ] && grep -q '^0 inconsistencies' k.out && grep -q 'in 2 processes' k.out &&
    grep -q 'exited with 0$' k.out; then
    good=$((good + 1))
  else
    bad="round $round: rc=$rc $(grep -m1 'exited\|killed\|inconsistenc' k.out | cut -c1-100) $(line_of k.err)"
  fi
done
verdict check-clone-vm-follow "$([ $good = 6 ] && echo 0 || echo 1)" "$good of 6 runs: the program's own check passes, 0 inconsistencies, exit 0 (before: wrong results or SIGSEGV in 6 of 6) $bad"
run $((4 << 20)) 120 b.out b.err check -- ./self_modify
blocks=$(grep -oE '^[0-9]+ inconsistencies; [0-9]+ instructions checked' b.out || true)
brc=$rc
run $((4 << 20)) 120 s.out s.err check --single-step -- ./self_modify
steps=$(grep -oE '^[0-9]+ inconsistencies; [0-9]+ instructions checked' s.out || true)
ok=1
{ [ $brc != 1 ] || [ $rc != 1 ] || [ -z "$blocks" ] || [ "$blocks" != "$steps" ] ||
  [ "${blocks%% *}" != 2 ]; } && ok=0
verdict check-self-modifying $((1 - ok)) "breakpoints: '$blocks' rc=$brc; --single-step: '$steps' rc=$rc (before: 667 against 5,608 checked, exit 0)"
res=""
ok=1
for mode in "" --single-step; do
  # shellcheck disable=SC2086 # the mode or nothing
  run $((4 << 20)) 60 k.out k.err check $mode -- ./own_signals
  res+="${mode:-breakpoints}: $(grep -oE '[0-9]+ signal handlers' k.out || true), $(grep -oE 'exited with [0-9]+' k.out || echo "rc=$rc"); "
  { grep -q 'exited with 3$' k.out && grep -q ' 3 signal handlers' k.out; } || ok=0
done
verdict check-own-sigtrap $((1 - ok)) "${res}natively 3 (before: 0)"
# SIGSTOP: the program stops itself and stays stopped under check until a SIGCONT.
env --default-signal=INT,TERM "$ehelf" check -- ./own_signals stop >k.out 2>&1 &
checker=$!
bg_pids+=("$checker")
for _ in $(seq 200); do [ -n "$(pids_in k.out)" ] && break; sleep 0.05; done
prog_pid=$(pids_in k.out | head -1 || true)
stopped_for=0
for _ in $(seq 200); do
  [ -n "$prog_pid" ] && alive "$prog_pid" || break
  state=$(sed 's/.*) //' "/proc/$prog_pid/stat" 2>/dev/null | cut -c1 || true)
  if [ "$state" = T ] || [ "$state" = t ]; then stopped_for=$((stopped_for + 1)); else stopped_for=0; fi
  [ $stopped_for -ge 10 ] && break
  sleep 0.05
done
ran_on=$(grep -c '^continued' k.out || true)
for _ in $(seq 100); do
  [ -n "$prog_pid" ] && kill -CONT "$prog_pid" 2>/dev/null || true
  kill -0 "$checker" 2>/dev/null || break
  sleep 0.1
done
st=0
if kill -0 "$checker" 2>/dev/null; then stop_bg "$checker"; st=killed; else wait "$checker" || st=$?; fi
ok=1
{ [ $stopped_for -lt 10 ] || [ "$ran_on" != 0 ] || [ "$st" != 0 ] || ! grep -q '^continued' k.out ||
  ! grep -q 'exited with 3$' k.out; } && ok=0
verdict check-own-sigstop $((1 - ok)) "stopped for $((stopped_for * 50)) ms before SIGCONT, $(grep -c '^continued' k.out || true) 'continued', $(grep -oE 'exited with [0-9]+' k.out || echo "rc=$st")"
# SIGTERM and SIGINT, 20 times, at random moments of a busy check: each time the check stops
# within 5 s, prints its partial summary, and no process of the program's tree is left.
honoured=0 bad="" t0=$EPOCHREALTIME
for i in $(seq 20); do
  sig=TERM
  [ $((i % 2)) = 0 ] && sig=INT
  env --default-signal=INT,TERM "$ehelf" check -- ./busy >k.out 2>&1 &
  checker=$!
  bg_pids+=("$checker")
  for _ in $(seq 400); do [ "$(pids_in k.out | wc -l)" -ge 3 ] && break; sleep 0.025; done
  tree=$(pids_in k.out | tr '\n' ' ')
  sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
  kill -$sig "$checker" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$checker" 2>/dev/null || break; sleep 0.05; done
  st=0
  if kill -0 "$checker" 2>/dev/null; then
    st=ignored
    stop_bg "$checker"
  else
    wait "$checker" || st=$?
  fi
  sleep 0.1
  left=""
  for pid in $tree; do alive "$pid" && { left+="$pid "; kill -KILL "$pid" 2>/dev/null || true; }; done
  if [ "$st" = ignored ] || [ -n "$left" ] || [ "$(wc -w <<<"$tree")" != 3 ] ||
    ! grep -q "interrupted by SIG" k.out || ! grep -q '(program killed)' k.out; then
    bad="run $i SIG$sig: status $st, left: ${left:-none}, $(grep -m1 'inconsistencies' k.out | cut -c1-60)"
  else
    honoured=$((honoured + 1))
  fi
done
verdict check-sigterm-sigint-20 "$([ $honoured = 20 ] && echo 0 || echo 1)" "$honoured of 20 honoured within 5 s with the summary, tree killed ($(since "$t0")s; before: 12 of 20 ignored) $bad"
run $((4 << 20)) 120 k.out k.err check --max-steps 200000 -- ./busy
tree=$(pids_in k.out | tr '\n' ' ')
sleep 0.1
left=""
for pid in $tree; do alive "$pid" && { left+="$pid "; kill -KILL "$pid" 2>/dev/null || true; }; done
ok=1
{ [ $rc != 0 ] || [ -n "$left" ] || [ "$(wc -w <<<"$tree")" != 3 ] ||
  ! grep -q 'stopped at the step limit (program killed)' k.out; } && ok=0
verdict check-max-steps-tree $((1 - ok)) "rc=$rc, tree of $(wc -w <<<"$tree"), left running: ${left:-none}"
rm -f clone_vm own_signals self_modify busy

# ---- Medium and Low: libehelf-unwind ------------------------------------------------------------
# Built against the build's library and this tree's headers (no install into the build directory).
capi=$tests/capi
# shellcheck disable=SC2054 # -Wl,-rpath,DIR is one word
ours=(-I"$repo/src/capi/include/ehelf/libunwind" -L"$build_dir/lib" -Wl,-rpath,"$build_dir/lib"
      -lehelf-unwind)
if [ -e "$build_dir/lib/libehelf-unwind.so" ]; then
  cc -O2 -shared -fPIC -o libreload_a.so "$capi/reload_lib.c"
  cc -O2 -shared -fPIC -DDEEP -o libreload_b.so "$capi/reload_lib.c"
  cc -O2 -g -rdynamic -o reload_ours "$capi/reload_user.c" "${ours[@]}" -ldl
  rc=0
  (ulimit -v $((4 << 20)) && exec timeout 120 ./reload_ours "$work/libreload_a.so" "$work/libreload_b.so" 100) >reload.txt 2>&1 || rc=$?
  first=$(awk '/^ROUND/ && / main=0$/ { print $2 $3; exit }' reload.txt)
  summary=$(tail -1 reload.txt)
  if grep -q '^REACHED .* (0 at a reused address)$' reload.txt; then
    report capi-dlclose-reuse-200 SKIP "no library was mapped where the previous one was: $summary"
  else
    ok=1
    { [ $rc != 0 ] || ! grep -qx 'REACHED 200 of 200 walks reached main (.*)' reload.txt; } && ok=0
    # The real libunwind, when installed, on the same walks (the issue: 100 of 200 truncated).
    theirs=""
    if cc -O2 -rdynamic -o reload_real "$capi/reload_user.c" -lunwind -ldl 2>/dev/null; then
      theirs=$( (ulimit -v $((4 << 20)) && exec timeout 120 ./reload_real "$work/libreload_a.so" "$work/libreload_b.so" 100) 2>&1 | tail -1 || true)
      theirs="; libunwind: ${theirs#REACHED }"
    fi
    verdict capi-dlclose-reuse-200 $((1 - ok)) "rc=$rc ${summary#REACHED }${first:+; the first walk short of main: round ${first}}$theirs"
  fi
  cc -O2 -g -Wl,-z,now -o stack_use "$capi/stack_use.c" "${ours[@]}"
  rc=0
  ./stack_use measure >stack_use.txt 2>&1 || rc=$?
  (timeout 30 ./stack_use small) >stack_small.txt 2>&1 || rc=$?
  ok=1
  { [ $rc != 0 ] || [ "$(grep -c '^USE ' stack_use.txt)" != 2 ] ||
    ! awk '/^USE / { split($3, f, "="); split($4, l, "="); if (f[2] > 4096 || l[2] > 4096) bad = 1 } END { exit bad }' stack_use.txt ||
    [ "$(grep -cE '^SMALL (backtrace|cursor) frames=([5-9]|[1-9][0-9])$' stack_small.txt)" != 2 ]; } && ok=0
  verdict capi-sigaltstack-8k $((1 - ok)) "rc=$rc $(grep -E '^(USE|SMALL)' stack_use.txt stack_small.txt | sed 's/^[^:]*://' | tr '\n' ';') (bound 4096 bytes; before 12.7 KB, a crash on 8 KiB)"
else
  report capi-dlclose-reuse-200 SKIP "no libehelf-unwind.so in $build_dir/lib"
  report capi-sigaltstack-8k SKIP "no libehelf-unwind.so in $build_dir/lib"
fi
rm -f libreload_* reload_ours reload_real stack_use

# ---- Low: compile under a hard RLIMIT_AS below 4 GiB -------------------------------------------
libstdcxx=$(readlink -f /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
res="" ok=1
for input in prog "$libstdcxx"; do
  rc=0
  (ulimit -v 3500000 && # soft and hard
    exec /usr/bin/time -f '%M' -o "$work/rss" timeout 300 "$ehelf" compile "$input" -o limited.so) \
    >l.out 2>l.err </dev/null || rc=$?
  if [ $rc = 0 ] && readelf -d limited.so >/dev/null 2>&1; then
    res+="$(basename "$input"): built; "
  else
    ok=0 res+="$(basename "$input"): rc=$rc $(line_of l.err); "
  fi
  rm -f limited.so
done
verdict compile-hard-rlimit-as $((1 - ok)) "hard RLIMIT_AS 3.5 GB: $res(before: 'cc failed: ' and exit 1)"
# Limits so low that the C compiler cannot start: each failure says what failed, on one line.
failed=0 bad="" said=""
for limit in 20000 35000 50000; do
  rc=0
  (ulimit -v $limit && exec timeout 120 "$ehelf" compile prog -o tiny.so) >l.out 2>l.err </dev/null || rc=$?
  rm -f tiny.so
  [ $rc = 0 ] && continue
  failed=$((failed + 1))
  said="$(line_of l.err | cut -c1-90)"
  if killed || [ "$(lines l.err)" != 1 ] || grep -qE 'cc failed: *$' l.err; then
    bad+="$limit KB: rc=$rc $(line_of l.err); "
  fi
done
ok=1
{ [ -n "$bad" ] || [ $failed = 0 ]; } && ok=0
verdict compile-low-rlimit-as $((1 - ok)) "$failed of 3 runs under 20-50 MB failed, each with its reason: ${bad:-$said}"
rm -f prog prog.c

# ---- Low: samples before their process's FORK record -------------------------------------------
rc=0
(ulimit -v $((4 << 20)) && exec timeout 600 bash "$tests/scripts/test_perf_unmapped_process.sh" "$build_dir" "$repo") >u.txt 2>&1 || rc=$?
if [ $rc = 77 ]; then
  report perf-unmapped-process SKIP "$(line_of u.txt)"
else
  verdict perf-unmapped-process "$rc" "test_perf_unmapped_process.sh: rc=$rc $(grep -E '^(ok|FAIL)' u.txt | cut -c1-80 | tr '\n' ';')"
fi

echo "hostile-rerun: $((npass + nfail + nskip)) attacks: $npass passed, $nfail failed, $nskip skipped in $(since "$start") s"
[ $nfail = 0 ]
