#!/usr/bin/env bash
# `ehelf stack -p` on live processes, against eu-stack -p (elfutils) and gdb:
#   - the stack_target fixture (-O2 -fomit-frame-pointer): a thread blocked in a signal handler,
#     a thread deep in recursion through qsort callbacks with alloca, the main thread in
#     pthread_join. Every backend (auto, compiled with the process's modules compiled into a
#     private cache, table, interp) must give, per thread, exactly eu-stack's sequence of pcs and
#     gdb's sequence of real (not inline, not tail-call) frames, with function names agreeing
#     with gdb's wherever gdb names a frame (equal names, or aliases: the same function start);
#   - `sleep 100` and a process with many threads, against eu-stack;
#   - errors: no such pid, permission refused (as an unprivileged user, when setpriv exists).
# After every ehelf run no thread of the target may be left stopped.
# scripts/setup.sh installs elfutils and gdb; ptrace must be allowed (root, or yama ptrace_scope 0).
set -uo pipefail
build=$1
ehelf="$build/bin/ehelf"
target="$build/tests/fixtures/stack_target"
work=$(mktemp -d)
pids=()
cleanup() {
  # Only the script itself: a background job signalled before it execs runs the traps too.
  [ "$BASHPID" = "$$" ] || return 0
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail=0
DEPTH=12 # stack_target.c's recursion depth: DEPTH + 1 levels of sort_level -> qsort -> compare

for tool in eu-stack gdb python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "FAIL: $tool is not installed (scripts/setup.sh installs elfutils and gdb)"
    exit 1
  fi
done
[ -x "$target" ] || { echo "FAIL: $target not built"; exit 1; }
scope_file=/proc/sys/kernel/yama/ptrace_scope
if [ -r $scope_file ]; then
  scope=$(cat $scope_file)
  if [ "$scope" -ge 3 ] || { [ "$scope" -ge 1 ] && [ "$(id -u)" -ne 0 ]; }; then
    echo "FAIL: ptrace is restricted here (kernel.yama.ptrace_scope=$scope, uid $(id -u)):"
    echo "      run as root, or: sysctl kernel.yama.ptrace_scope=0"
    exit 1
  fi
fi

# Starts a program in the background and waits, 10 s at most, until it is in its steady state,
# as `how` says: `ready`, it printed "ready" (the fixtures do once in place); `blocked`, it runs
# the program (exec done) and sleeps in a system call; `exec`, it runs the program (a static one
# without a loader, in its loop from the first instruction). Sets $tpid.
start() { # how, command...
  local how=$1 program
  shift
  program=$(readlink -f "$(command -v "$1")")
  "$@" >"$work/start.out" 2>&1 &
  tpid=$!
  pids+=("$tpid")
  for _ in $(seq 200); do
    case $how in
      ready) grep -q ready "$work/start.out" && return 0 ;;
      blocked | exec)
        if [ "$(readlink "/proc/$tpid/exe" 2>/dev/null)" = "$program" ]; then
          [ "$how" = exec ] && return 0
          # (the state after "(comm) "; the loader has run when the program blocks)
          [ "$(sed 's/.*) //' "/proc/$tpid/stat" 2>/dev/null | cut -c1)" = S ] && return 0
        fi ;;
    esac
    sleep 0.05
  done
  echo "FAIL: $* did not get to its steady state ($how)"; cat "$work/start.out"
  return 1
}

stop_target() { # pid
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

# No thread of $1 may be in a ptrace or job-control stop.
check_running() { # pid, what
  local states
  states=$(cat /proc/"$1"/task/*/stat 2>/dev/null | sed 's/.*) //' | cut -c1 | tr -d '\n')
  case "$states" in
    *[tT]*) echo "FAIL $2: a thread of $1 was left stopped (states: $states)"; fail=1 ;;
  esac
}

# Runs ehelf stack; output in $work/$name; fails on a non-zero exit or anything on stderr.
run_ehelf() { # name, pid, args...
  local name=$1 pid=$2
  shift 2
  "$ehelf" stack -p "$pid" "$@" >"$work/$name" 2>"$work/$name.err"
  local rc=$?
  if [ $rc -ne 0 ] || [ -s "$work/$name.err" ]; then
    echo "FAIL $name: ehelf stack -p $pid $* exited $rc:"; cat "$work/$name.err"; fail=1
    if grep -q "not permitted" "$work/$name.err"; then
      echo "      ptrace is not permitted here: run the tests as root or with CAP_SYS_PTRACE"
      exit 1
    fi
  fi
  check_running "$pid" "$name"
}

run_eu_stack() { # name, pid
  eu-stack -p "$2" -m >"$work/$1" 2>"$work/$1.err"
  local rc=$?
  # 1: some frames had non-fatal errors (printed on stderr); the pcs are still comparable.
  if [ $rc -gt 1 ]; then echo "FAIL $1: eu-stack -p $2 exited $rc:"; cat "$work/$1.err"; fail=1; fi
}

# gdb: the usual `thread apply all bt` (kept in $work/$1.bt for the log), and every frame of every
# thread with its kind (normal, inline, tailcall, sigtramp), function name and function start,
# as JSON lines in $work/$1.
cat >"$work/frames.py" <<'PY'
import gdb, json, os
kinds = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.TAILCALL_FRAME: "tailcall",
         gdb.SIGTRAMP_FRAME: "sigtramp"}
with open(os.environ["GDB_FRAMES_OUT"], "w") as out:
    for t in sorted(gdb.selected_inferior().threads(), key=lambda t: t.ptid[1]):
        t.switch()
        frames = []
        f = gdb.newest_frame()
        while f is not None:
            start = None
            fn = f.function()
            if fn is not None:
                try:
                    start = int(fn.value().address)
                except Exception:
                    start = None
            if start is None and f.type() == gdb.NORMAL_FRAME:
                at = f.pc() if f.level() == 0 else f.pc() - 1
                words = gdb.execute("info symbol 0x%x" % at, to_string=True).split()
                if len(words) >= 3 and words[1] == "+":
                    start = at - int(words[2])
                elif len(words) >= 2 and words[1] == "in":
                    start = at
            frames.append({"pc": f.pc(), "kind": kinds.get(f.type(), str(f.type())),
                           "name": f.name(), "start": start})
            try:
                f = f.older()
            except gdb.error:
                break
        out.write(json.dumps({"tid": t.ptid[1], "frames": frames}) + "\n")
PY
run_gdb() { # name, pid
  GDB_FRAMES_OUT="$work/$1" timeout 120 gdb -p "$2" -batch -nx -iex 'set debuginfod enabled off' \
    -ex 'set backtrace past-main on' -ex 'set backtrace past-entry on' \
    -ex 'thread apply all bt' -x "$work/frames.py" >"$work/$1.bt" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$work/$1" ]; then
    echo "FAIL $1: gdb -p $2 exited $rc:"; tail -5 "$work/$1.bt"; fail=1
  fi
}

# The comparisons. Arguments: mode (fixture|plain), eu-stack output, gdb JSON ('' for none),
# then the ehelf outputs (run with -o -m -v).
cat >"$work/compare.py" <<'PY'
import json, re, sys

mode, eu_file, gdb_file, ehelf_files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
depth = int(__import__("os").environ.get("DEPTH", "12"))
failures = []

def fail(msg):
    failures.append(msg)

FRAME = re.compile(r"^#(\d+)\s+0x([0-9a-f]{16})(?: ([^ ].*?))?(?: - (.*))?$")

def parse_stack(path, offsets):
    """eu-stack layout: {tid: [(pc, name, offset, module)]}, the pid, the 'stopped:' lines."""
    threads, order, stops, pid, tid = {}, [], {}, None, None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("PID "):
            pid = int(line.split()[1])
        elif line.startswith("TID "):
            tid = int(line[4:].rstrip(":"))
            threads[tid] = []
            order.append(tid)
        elif line.startswith("#"):
            m = FRAME.match(line)
            if not m or tid is None:
                fail(f"{path}: bad frame line {line!r}")
                continue
            if int(m.group(1)) != len(threads[tid]):
                fail(f"{path}: frame numbers out of order at {line!r}")
            name, off = m.group(3), 0
            if name and offsets:
                mo = re.match(r"^(.*)\+0x([0-9a-f]+)$", name)
                if mo:
                    name, off = mo.group(1), int(mo.group(2), 16)
            threads[tid].append((int(m.group(2), 16), name, off, m.group(4)))
        elif line.startswith("    stopped: "):
            stops[tid] = line[13:]
    return pid, threads, order, stops

def norm(name):
    """Names that denote the same function: version suffixes and compiler clone suffixes off."""
    if name is None:
        return None
    name = name.split("@")[0]
    name = re.sub(r"(\.(part|isra|constprop|cold|lto_priv)(\.\d+)?)+$", "", name)
    return name

eu_pid, eu, eu_order, _ = parse_stack(eu_file, False)
runs = [(f, *parse_stack(f, True)) for f in ehelf_files]
summary = []
for path, pid, threads, order, stops in runs:
    if pid != eu_pid:
        fail(f"{path}: PID line says {pid}, eu-stack says {eu_pid}")
    if sorted(threads) != sorted(eu):
        fail(f"{path}: threads {sorted(threads)} but eu-stack has {sorted(eu)}")
    if order != eu_order:
        fail(f"{path}: threads printed in order {order}, eu-stack: {eu_order}")
    frames = same_names = 0
    for tid in eu:
        mine = threads.get(tid, [])
        theirs = eu[tid]
        if [f[0] for f in mine] != [f[0] for f in theirs]:
            fail(f"{path}: TID {tid}: pcs differ from eu-stack:\n    ehelf:    "
                 + " ".join(f"{f[0]:x}" for f in mine) + "\n    eu-stack: "
                 + " ".join(f"{f[0]:x}" for f in theirs))
            continue
        frames += len(mine)
        for a, b in zip(mine, theirs):
            if a[3] != b[3]:
                fail(f"{path}: TID {tid} pc {a[0]:x}: module {a[3]} but eu-stack says {b[3]}")
            if a[1] == b[1]:
                same_names += 1
        if not stops.get(tid, "").startswith("end of stack"):
            fail(f"{path}: TID {tid} walk stopped with: {stops.get(tid)!r}")
    summary.append(f"{path.rsplit('/', 1)[-1]}: {len(threads)} threads, {frames} frames match "
                   f"eu-stack's pcs and modules ({same_names} with the very same symbol name)")

# The backends agree among themselves completely (names and offsets too).
for path, _, threads, _, _ in runs[1:]:
    if threads != runs[0][2]:
        fail(f"{path} differs from {runs[0][0]}")

if gdb_file:
    gdb_threads = {}
    for line in open(gdb_file):
        d = json.loads(line)
        gdb_threads[d["tid"]] = d["frames"]
    if sorted(gdb_threads) != sorted(eu):
        fail(f"gdb sees threads {sorted(gdb_threads)}, eu-stack {sorted(eu)}")
    mine_all = runs[0][2]
    real = named = exact = alias = skipped = 0
    for tid, gframes in gdb_threads.items():
        # Inline frames share the pc of the real frame after them; tail-call frames are gdb's
        # reconstruction from DWARF call-site data, absent from the machine stack.
        physical = [g for g in gframes if g["kind"] in ("normal", "sigtramp")]
        skipped += len(gframes) - len(physical)
        mine = mine_all.get(tid, [])
        if [g["pc"] for g in physical] != [f[0] for f in mine]:
            fail(f"TID {tid}: pcs differ from gdb's real frames:\n    ehelf: "
                 + " ".join(f"{f[0]:x}" for f in mine) + "\n    gdb:   "
                 + " ".join(f"{g['pc']:x}" for g in physical))
            continue
        real += len(mine)
        for k, (g, f) in enumerate(zip(physical, mine)):
            if g["kind"] == "sigtramp":
                named += 1
                if f[1] != "__restore_rt":
                    fail(f"TID {tid} #{k}: gdb's signal trampoline frame is {f[1]!r} in ehelf")
                else:
                    exact += g["name"] == "__restore_rt"
                    alias += g["name"] != "__restore_rt"
                continue
            if not g["name"]:
                continue
            named += 1
            start = f[0] - f[2] if f[1] else None
            if f[1] == g["name"]:
                exact += 1
            elif f[1] and (norm(f[1]) == norm(g["name"]) or (g["start"] is not None and start == g["start"])):
                alias += 1
            else:
                fail(f"TID {tid} #{k} pc {f[0]:x}: ehelf names it {f[1]!r} (start "
                     f"{start and hex(start)}), gdb {g['name']!r} (start {g['start'] and hex(g['start'])})")
    summary.append(f"gdb: {real} real frames in {len(gdb_threads)} threads match ehelf's pcs "
                   f"({skipped} inline/tail-call frames of gdb's set aside); of the {named} frames gdb "
                   f"names, {exact} have the same name and {alias} an alias of the same function")

if mode == "fixture":
    threads = runs[0][2]
    def names(tid):
        return [norm(f[1]) for f in threads[tid]]
    sig = [t for t in threads if "on_usr1" in names(t)]
    rec = [t for t in threads if "block_at_bottom" in names(t)]
    main = [t for t in threads if "main" in names(t)]
    if len(sig) != 1 or len(rec) != 1 or len(main) != 1 or len(threads) != 3:
        fail(f"expected 3 threads (signal, recursion, main), got {[names(t) for t in threads]}")
    else:
        n = names(sig[0])
        want = ["wait_in_handler", "on_usr1", "__restore_rt", "spin_until_signalled",
                "signal_thread", "start_thread"]
        i = n.index("wait_in_handler") if "wait_in_handler" in n else -1
        if i < 1 or n[i:i + len(want)] != want or not n[-1].endswith("clone3"):
            fail(f"signal thread does not go handler -> __restore_rt -> interrupted code -> "
                 f"thread start: {n}")
        n = names(rec[0])
        counts = {k: sum(1 for x in n if x and k in x) for k in ("sort_level", "qsort", "compare")}
        if any(c != depth + 1 for c in counts.values()):
            fail(f"recursion thread: expected {depth + 1} levels, got {counts}: {n}")
        if n[-3:-1] != ["recursion_thread", "start_thread"]:
            fail(f"recursion thread does not end in recursion_thread, start_thread: {n[-4:]}")
        n = names(main[0])
        if "main" not in n or n[-1] != "_start":
            fail(f"main thread does not reach _start: {n}")
        summary.append(f"signal thread: {len(names(sig[0]))} frames through __restore_rt; "
                       f"recursion thread: {len(names(rec[0]))} frames, {depth + 1} qsort levels")

for s in summary:
    print("     " + s)
for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
PY

compare() { # label, mode, eu, gdb, ehelf files...
  local label=$1
  shift
  if DEPTH=$DEPTH python3 "$work/compare.py" "$@" >"$work/compare.out" 2>&1; then
    echo "ok   $label"
  else
    echo "FAIL $label"; fail=1
  fi
  cat "$work/compare.out"
}

# --- the fixture, every backend, eu-stack and gdb ---
if start ready "$target"; then
  fixture=$tpid
  export EHELF_CACHE="$work/cache"
  # The compiled backend needs eh_elf objects: compile every module the fixture maps.
  mapfile -t modules < <(awk '$2 ~ /x/ && $6 ~ /^\// {print $6}' /proc/"$fixture"/maps | sort -u)
  if ! "$ehelf" compile --cache "${modules[@]}" >"$work/compile.out" 2>&1; then
    echo "FAIL: ehelf compile --cache ${modules[*]}:"; cat "$work/compile.out"; fail=1
  fi
  files=()
  for b in auto compiled table interp; do
    run_ehelf "ehelf.$b" "$fixture" --backend="$b" -o -m -v
    files+=("$work/ehelf.$b")
  done
  # The compiled backend really ran the eh_elf code (not only the table fallback).
  if ! grep -q "unwound by compiled" "$work/ehelf.compiled"; then
    echo "FAIL: --backend=compiled unwound no frame with compiled code"; cat "$work/ehelf.compiled"; fail=1
  fi
  if grep -q "compiled" "$work/ehelf.interp" || grep -q "compiled" "$work/ehelf.table"; then
    echo "FAIL: --backend=table/interp used compiled code"; fail=1
  fi
  # -v says why the slow path ran: the thread in a signal handler is unwound through
  # __restore_rt, whose CFA is a DWARF expression (no UnwindRule expresses it).
  if grep -Eq "^    [0-9]+ steps? ran the interpreter: .*cfa is an expression [0-9]+" "$work/ehelf.table"; then
    echo "ok   -v: the interpreter's steps counted by reason"
  else
    echo "FAIL -v: no 'ran the interpreter: cfa is an expression' line"; cat "$work/ehelf.table"; fail=1
  fi
  run_eu_stack eu "$fixture"
  run_gdb gdb "$fixture"
  compare "fixture: 4 backends vs eu-stack and gdb" fixture "$work/eu" "$work/gdb" "${files[@]}"
  # The default layout is eu-stack's exactly (no offsets, no modules, no stop reasons).
  run_ehelf ehelf.plain "$fixture"
  eu-stack -p "$fixture" >"$work/eu.plain" 2>/dev/null
  sed -E 's/^(#[0-9]+ +0x[0-9a-f]{16}).*/\1/' "$work/eu.plain" >"$work/eu.pcs"
  sed -E 's/^(#[0-9]+ +0x[0-9a-f]{16}).*/\1/' "$work/ehelf.plain" >"$work/ehelf.pcs"
  if ! diff -u "$work/eu.pcs" "$work/ehelf.pcs" >"$work/layout.diff"; then
    echo "FAIL layout: ehelf stack's lines differ from eu-stack's:"; head -20 "$work/layout.diff"; fail=1
  else
    echo "ok   layout: 'PID n - process', 'TID n:', '#k  0x<16 hex digits>' lines as eu-stack's"
  fi
  # -n caps the frames per thread.
  # --backend compiled where a module has no eh_elf: unwound by its table, and said.
  mkdir -p "$work/empty-cache"
  EHELF_CACHE="$work/empty-cache" "$ehelf" stack -p "$fixture" --backend=compiled \
    >"$work/nocache.out" 2>"$work/nocache.err"
  check_running "$fixture" "no cache"
  if grep -q "^ehelf: .*libc.so.6: no eh_elf in the cache (ehelf compile --cache); unwound with its table$" \
       "$work/nocache.err" && grep -q "^#" "$work/nocache.out"; then
    echo "ok   --backend compiled without eh_elfs: unwound by the tables, said once per file"
  else
    echo "FAIL --backend compiled without eh_elfs:"; cat "$work/nocache.err"; fail=1
  fi
  # ... and says so for each thread it cut, as eu-stack does.
  "$ehelf" stack -p "$fixture" -n 3 >"$work/ehelf.n3" 2>"$work/ehelf.n3.err"
  check_running "$fixture" "-n 3"
  cut_threads=$(grep -c "^ehelf: tid [0-9]*: shown max 3 frames (-n N, 0 for unlimited)$" "$work/ehelf.n3.err")
  if awk '/^#/ {n[t]++} /^TID/ {t=$2} END {for (k in n) if (n[k] > 3) exit 1}' "$work/ehelf.n3" &&
     [ "$cut_threads" -ge 1 ] && [ "$cut_threads" = "$(wc -l < "$work/ehelf.n3.err")" ]; then
    echo "ok   -n 3: at most 3 frames per thread, $cut_threads cut threads said on stderr"
  else
    echo "FAIL -n 3:"; cat "$work/ehelf.n3" "$work/ehelf.n3.err"; fail=1
  fi
  # Unprivileged: ptrace refused, one line naming the pid.
  if command -v setpriv >/dev/null && [ "$(id -u)" -eq 0 ]; then
    cp "$ehelf" "$work/ehelf-copy"
    chmod 755 "$work" "$work/ehelf-copy"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$work/ehelf-copy" stack -p "$fixture" \
      >"$work/eperm.out" 2>"$work/eperm.err"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$work/eperm.err")" -eq 1 ] &&
       grep -q "pid $fixture: .*not permitted" "$work/eperm.err" && [ ! -s "$work/eperm.out" ]; then
      echo "ok   unprivileged: $(cat "$work/eperm.err")"
    else
      echo "FAIL unprivileged: rc=$rc"; cat "$work/eperm.err" "$work/eperm.out"; fail=1
    fi
    check_running "$fixture" unprivileged
  fi
  unset EHELF_CACHE
  stop_target "$fixture"
else
  fail=1
fi

# --- sleep 100 ---
if start blocked sleep 100; then
  run_ehelf sleep.table "$tpid" --backend=table -o -m -v
  run_ehelf sleep.interp "$tpid" --backend=interp -o -m -v
  run_eu_stack sleep.eu "$tpid"
  run_gdb sleep.gdb "$tpid"
  compare "sleep 100 vs eu-stack and gdb" plain "$work/sleep.eu" "$work/sleep.gdb" \
    "$work/sleep.table" "$work/sleep.interp"
  stop_target "$tpid"
fi

# --- many threads ---
if start ready "$target" many 64; then
  run_ehelf many.auto "$tpid" -o -m -v
  run_ehelf many.interp "$tpid" --backend=interp -o -m -v
  run_eu_stack many.eu "$tpid"
  compare "65 threads vs eu-stack" plain "$work/many.eu" "" "$work/many.auto" "$work/many.interp"
  # SIGINT or SIGTERM at any moment (attaching, unwinding, printing): ehelf dies of it or
  # finishes, and the threads always run on. (Background jobs of a script ignore SIGINT: env
  # restores its default action.)
  interrupted=0 finished=0 before=$fail
  for i in $(seq 20); do
    sig=INT
    [ $((i % 2)) = 0 ] && sig=TERM
    env --default-signal=INT "$ehelf" stack -p "$tpid" --backend=interp >/dev/null 2>&1 &
    sleep "$(printf '0.%03d' $((i * 3 / 2)))" # 1 to 30 ms: before, while and after attaching
    kill -$sig $! 2>/dev/null
    wait $!
    rc=$?
    case $rc in
      0) finished=$((finished + 1)) ;;
      130|143) interrupted=$((interrupted + 1)) ;;
      *) echo "FAIL sigint: ehelf exited $rc after SIG$sig"; fail=1 ;;
    esac
    sleep 0.05
    check_running "$tpid" "sigint $i"
  done
  [ "$fail" = "$before" ] &&
    echo "ok   SIGINT/SIGTERM: 20 runs ($interrupted interrupted, $finished finished), no thread left stopped"
  stop_target "$tpid"
else
  fail=1
fi

# --- threads that come and go while ehelf attaches ---
# Each run must succeed: a thread that exits (or is exiting) during the attach is skipped, as
# eu-stack skips it, and -v says so.
churn="$build/tests/fixtures/thread_churn"
if start ready "$churn"; then
  before=$fail skipped=0
  for i in $(seq 40); do
    if ! "$ehelf" stack -p "$tpid" -v >"$work/churn.out" 2>"$work/churn.err"; then
      echo "FAIL churn run $i: $(cat "$work/churn.err")"; fail=1; break
    fi
    grep -q "exited while being attached" "$work/churn.err" && skipped=$((skipped + 1))
    grep -q "^TID $tpid:" "$work/churn.out" || { echo "FAIL churn run $i: no main thread"; fail=1; break; }
  done
  check_running "$tpid" "churn"
  [ "$fail" = "$before" ] &&
    echo "ok   thread churn: 40 runs, each succeeded ($skipped saw threads exit while attaching)"
  stop_target "$tpid"
else
  fail=1
fi

# --- a thread running in the vDSO (image read from the process) ---
# It runs, so eu-stack would see other pcs: check that every sample unwinds to _start and that
# some start in the vDSO.
if start ready "$target" vdso; then
  in_vdso=0 good=0
  for i in $(seq 10); do
    run_ehelf vdso.$i "$tpid" -m -v
    grep -q "^#0 .* - \[vdso: $tpid\]$" "$work/vdso.$i" && in_vdso=$((in_vdso + 1))
    grep -q "^#[0-9]* .* _start - " "$work/vdso.$i" && grep -q "stopped: end of stack" "$work/vdso.$i" &&
      good=$((good + 1))
  done
  if [ $good -eq 10 ] && [ $in_vdso -gt 0 ]; then
    echo "ok   vdso: 10 samples of a running thread reach _start, $in_vdso start in the vDSO"
  else
    echo "FAIL vdso: $good of 10 samples reach _start, $in_vdso start in the vDSO:"
    cat "$work/vdso.1"; fail=1
  fi
  stop_target "$tpid"
else
  fail=1
fi

# --- a return address held in a register (ra_register: rcx, from its pop to `jmp *%rcx`) ---
# Stopped nearly always in ra_in_rcx's loop, whose row says CFA=rsp+0 and the return address in
# rcx: every backend's walks from there go through call_it and main to _start, and gdb, stopped
# there too, names the same frames.
if start ready "$build/tests/fixtures/ra_register" 600000; then
  in_ra=0 good=0 runs=0
  for b in auto table interp; do
    for i in 1 2 3 4; do
      runs=$((runs + 1))
      run_ehelf "ra.$b.$i" "$tpid" --backend="$b"
      names=$(awk '/^#/ {printf "%s ", $3}' "$work/ra.$b.$i")
      case "$names" in
        "ra_in_rcx "*)
          in_ra=$((in_ra + 1))
          [ "$names" = "ra_in_rcx call_it main __libc_start_call_main __libc_start_main@@GLIBC_2.34 _start " ] &&
            good=$((good + 1)) ;;
      esac
    done
  done
  gdb -p "$tpid" -batch -nx -iex 'set debuginfod enabled off' -ex 'set backtrace past-main on' \
    -ex bt >"$work/ra.gdb" 2>&1
  check_running "$tpid" "gdb"
  gdb_names=$(sed -nE 's/^#[0-9]+ +(0x[0-9a-f]+ in )?([^ ]+) .*/\2/p' "$work/ra.gdb" | tr '\n' ' ')
  if [ "$in_ra" -ge $((runs / 2)) ] && [ "$good" -eq "$in_ra" ] &&
     case "$gdb_names" in "ra_in_rcx call_it main "*" _start ") true ;; *) false ;; esac; then
    echo "ok   return address in rcx: $good of $in_ra stops in ra_in_rcx (of $runs, 3 backends) reach _start through call_it; gdb: $gdb_names"
  else
    echo "FAIL return address in rcx: $good of $in_ra stops in ra_in_rcx (of $runs) reach _start through call_it; gdb: $gdb_names"
    cat "$work/ra.auto.1" "$work/ra.gdb"; fail=1
  fi
  stop_target "$tpid"
else
  fail=1
fi

# --- a function without an FDE that keeps a frame pointer (fp_no_fde) ---
# Stopped nearly always in spin_with_tables, called by no_fde (no CFI): the walk follows rbp
# through no_fde to call_no_fde, main and _start (said with -v), as gdb's backtrace does.
if start ready "$build/tests/fixtures/fp_no_fde" 600000; then
  good=0 in_spin=0
  for i in 1 2 3 4 5 6; do
    run_ehelf "fpn.$i" "$tpid" -v
    names=$(awk '/^#/ {printf "%s ", $3}' "$work/fpn.$i")
    case "$names" in
      "spin_with_tables no_fde "*)
        in_spin=$((in_spin + 1))
        [ "$names" = "spin_with_tables no_fde call_no_fde main __libc_start_call_main __libc_start_main@@GLIBC_2.34 _start " ] &&
          grep -q "frame pointer 1" "$work/fpn.$i" && good=$((good + 1)) ;;
    esac
  done
  gdb -p "$tpid" -batch -nx -iex 'set debuginfod enabled off' -ex 'set backtrace past-main on' \
    -ex bt >"$work/fpn.gdb" 2>&1
  check_running "$tpid" "gdb"
  gdb_names=$(sed -nE 's/^#[0-9]+ +(0x[0-9a-f]+ in )?([^ ]+) .*/\2/p' "$work/fpn.gdb" | tr '\n' ' ')
  if [ "$in_spin" -ge 3 ] && [ "$good" -eq "$in_spin" ] &&
     case "$gdb_names" in *"no_fde call_no_fde main "*" _start ") true ;; *) false ;; esac; then
    echo "ok   no FDE, frame pointer: $good of $in_spin stops in spin_with_tables (of 6) walk through no_fde by rbp to _start; gdb: $gdb_names"
  else
    echo "FAIL no FDE, frame pointer: $good of $in_spin stops reach _start through no_fde; gdb: $gdb_names"
    cat "$work/fpn.1" "$work/fpn.gdb"; fail=1
  fi
  stop_target "$tpid"
else
  fail=1
fi

# --- JIT code: three frames in anonymous executable memory, no module, frame pointers kept ---
# Stopped in spin_in_callback, called from the third JIT function: the walk follows rbp through the
# JIT frames (-v counts them) to run_jitted, main and _start; eu-stack's pcs are the oracle.
if start ready "$build/tests/fixtures/jit_frames" 60000; then
  run_ehelf jit "$tpid" -v
  run_eu_stack jit.eu "$tpid"
  check_running "$tpid" "eu-stack"
  # The callers' pcs (frame 0 moves on while the program spins between the two walks).
  eu_first=$(awk '/^TID/ {n++} n == 1 && /^#/ && $1 != "#0" {print $2}' "$work/jit.eu" | tr '\n' ' ')
  ours_first=$(awk '/^TID/ {n++} n == 1 && /^#/ && $1 != "#0" {print $2}' "$work/jit" | tr '\n' ' ')
  names=$(awk '/^TID/ {n++} n == 1 && /^#/ {printf "%s ", ($3 == "" ? "?" : $3)}' "$work/jit")
  case "$names" in
    *"spin_in_callback ? ? ? run_jitted main "*"_start ") named=1 ;;
    *) named=0 ;;
  esac
  if [ "$named" = 1 ] && [ "$ours_first" = "$eu_first" ] &&
     grep -q "frame pointer outside any module (JIT) 3" "$work/jit"; then
    echo "ok   JIT frames: 3 frames in no module followed by rbp to _start, the pcs of eu-stack"
  else
    echo "FAIL JIT frames: ehelf [$names] pcs [$ours_first] against eu-stack's [$eu_first]"
    cat "$work/jit" "$work/jit.eu"; fail=1
  fi
  stop_target "$tpid"
else
  fail=1
fi

# --- a program whose file was deleted after it started (./prog & rm prog) ---
# Its file is read through /proc/PID/map_files: the walks go through its frames to _start, with
# its names, as eu-stack's do.
cp "$target" "$work/deleted_target"
if start ready "$work/deleted_target"; then
  rm "$work/deleted_target"
  run_ehelf deleted "$tpid" -m
  if grep -q " main - $work/deleted_target (deleted)$" "$work/deleted" &&
     grep -q " _start - $work/deleted_target (deleted)$" "$work/deleted"; then
    echo "ok   deleted executable: walks reach main and _start in the deleted file"
  else
    echo "FAIL deleted executable:"; head -20 "$work/deleted"; fail=1
  fi
  stop_target "$tpid"
else
  fail=1
fi

# --- a 32-bit process: refused with one line (it is not unwound as x86_64) ---
printf '.globl _start\n_start:\n  jmp _start\n' > "$work/spin32.S"
if gcc -m32 -nostdlib -static -o "$work/spin32" "$work/spin32.S" 2>/dev/null && start exec "$work/spin32"; then
  "$ehelf" stack -p "$tpid" >"$work/i386.out" 2>"$work/i386.err"
  rc=$?
  check_running "$tpid" "32-bit"
  if [ $rc = 1 ] && grep -q "^ehelf: pid $tpid: a 32-bit (i386) process" "$work/i386.err" &&
     [ "$(wc -l < "$work/i386.err")" = 1 ] && [ ! -s "$work/i386.out" ]; then
    echo "ok   32-bit process: $(cat "$work/i386.err")"
  else
    echo "FAIL 32-bit process: exit $rc"; cat "$work/i386.out" "$work/i386.err"; fail=1
  fi
  stop_target "$tpid"
else
  echo "SKIP 32-bit process: gcc -m32 cannot build a static program here"
fi

# --- errors: one line on stderr naming the pid, non-zero exit ---
expect_error() { # name, expected text, command...
  local name=$1 want=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ] || ! grep -q -- "$want" "$work/err" || [ "$(wc -l <"$work/err")" -ne 1 ]; then
    echo "FAIL $name: rc=$rc, stderr:"; cat "$work/err"; fail=1
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}
expect_error no-such-pid "pid 2147483647: no such process" "$ehelf" stack -p 2147483647
expect_error bad-pid "pid 0: no such process" "$ehelf" stack -p 0
expect_error bad-backend "backend" "$ehelf" stack -p 1 --backend=fast
expect_error no-pid "pid" "$ehelf" stack
exit $fail
