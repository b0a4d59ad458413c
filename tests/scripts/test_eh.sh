#!/usr/bin/env bash
# libehelf-eh against libgcc_s: C++ programs (tests/eh/) built with g++ and clang++ at -O0 and
# -O2 run once as built (libgcc_s's unwinder) and once with libehelf-eh preloaded; stdout,
# stderr and the exit status must be the same, and the preloaded run must show that ours did
# the work (EHELF_EH_STATS's counters, or LD_DEBUG's bindings where the program aborts).
source "$(dirname "$0")/common.sh" "$@"
src=$2/tests/eh
lib="$(cd "$build" && pwd)/lib/libehelf-eh.so.0"
[ -f "$lib" ] || { echo "SKIP no $lib (target ehelf_eh not built)"; exit 77; }

# A sanitized build (EHELF_SANITIZE): the library needs AddressSanitizer's runtime loaded first,
# in both runs alike (it intercepts __cxa_throw, pthread_create and backtrace()).
pre=""
if grep -q libasan <<<"$(readelf -d "$lib")"; then
  pre="$(g++ -print-file-name=libasan.so)"
  # The runtime's replaced module maps are never freed; the caller's options kept otherwise.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  echo "sanitized build: LD_PRELOAD starts with $pre"
fi

# ---- the exported interface: libgcc_s's names under libgcc_s's versions, nothing more ----
expected="_Unwind_Backtrace GCC_3.3
_Unwind_DeleteException GCC_3.0
_Unwind_FindEnclosingFunction GCC_3.3
_Unwind_Find_FDE GCC_3.0
_Unwind_ForcedUnwind GCC_3.0
_Unwind_GetCFA GCC_3.3
_Unwind_GetDataRelBase GCC_3.0
_Unwind_GetGR GCC_3.0
_Unwind_GetIP GCC_3.0
_Unwind_GetIPInfo GCC_4.2.0
_Unwind_GetLanguageSpecificData GCC_3.0
_Unwind_GetRegionStart GCC_3.0
_Unwind_GetTextRelBase GCC_3.0
_Unwind_RaiseException GCC_3.0
_Unwind_Resume GCC_3.0
_Unwind_Resume_or_Rethrow GCC_3.3
_Unwind_SetGR GCC_3.0
_Unwind_SetIP GCC_3.0
__deregister_frame GCC_3.0
__deregister_frame_info GCC_3.0
__deregister_frame_info_bases GCC_3.0
__register_frame GCC_3.0
__register_frame_info GCC_3.0
__register_frame_info_bases GCC_3.0
__register_frame_info_table GCC_3.0
__register_frame_info_table_bases GCC_3.0
__register_frame_table GCC_3.0"
exports=$(objdump -T "$lib" | awk '$2 ~ /^[gw]$/ && $4 != "*ABS*" && $4 != "*UND*" {print $NF, $(NF-1)}' | sort)
if [ "$exports" = "$expected" ]; then ok "exports: 27 functions, libgcc_s's versions"; else
  bad "exports differ:"; diff <(echo "$expected") <(echo "$exports"); fi
libgcc=$(objdump -T /lib/x86_64-linux-gnu/libgcc_s.so.1 | awk '/_Unwind_|register_frame/ {print $NF, $(NF-1)}' | sort)
missing=$(comm -23 <(echo "$expected") <(echo "$libgcc"))
[ -z "$missing" ] && ok "each export is libgcc_s's, same version" || bad "not in libgcc_s: $missing"
if grep -q 'libgcc_s\|libstdc++' <<<"$(readelf -d "$lib")"; then
  [ -n "$pre" ] && ok "sanitized build links the shared libstdc++ (as libehelf-unwind)" ||
    bad "libehelf-eh depends on libgcc_s or libstdc++"
else ok "no dependency on libgcc_s or libstdc++"; fi

# ---- the programs ----
compilers=(g++)
command -v clang++ > /dev/null && compilers+=(clang++) || echo "SKIP clang++: not installed"

# run_pair NAME COUNTER PROGRAM [ARGS...]: both runs, compared; COUNTER (raise, resume, forced,
# backtrace) must be non-zero in ours.
run_pair() {
  local name=$1 counter=$2 prog=$3; shift 3
  local rc_ref rc_ours
  # In a subshell whose own stderr is dropped: the shell's "Aborted" line is not the program's.
  (LD_PRELOAD="$pre" "$prog" "$@" > "$work/ref.out" 2> "$work/ref.err"; exit $?) 2> /dev/null
  rc_ref=$?
  (EHELF_EH_STATS=1 LD_PRELOAD="$pre${pre:+ }$lib" "$prog" "$@" > "$work/ours.out" \
    2> "$work/ours.all"; exit $?) 2> /dev/null
  rc_ours=$?
  grep -v '^ehelf-eh: ' "$work/ours.all" > "$work/ours.err"
  local stats; stats=$(grep '^ehelf-eh: ' "$work/ours.all")
  if [ $rc_ref != $rc_ours ]; then bad "$name: exit $rc_ours, libgcc_s $rc_ref"; return; fi
  if ! cmp -s "$work/ref.out" "$work/ours.out"; then
    bad "$name: stdout differs"; diff "$work/ref.out" "$work/ours.out" | head -20; return; fi
  if ! cmp -s "$work/ref.err" "$work/ours.err"; then
    bad "$name: stderr differs"; diff "$work/ref.err" "$work/ours.err" | head -20; return; fi
  if [ "$counter" = bindings ]; then
    # The program aborts (std::terminate): no exit-time counters; the loader says who served.
    (LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/bind" LD_PRELOAD="$pre${pre:+ }$lib" "$prog" "$@" \
      > /dev/null 2>&1; exit $?) 2> /dev/null
    # libstdc++'s reference, or under ASan its interceptor's (which libstdc++'s binds to).
    if grep -qE "(libstdc\+\+\.so\.6|libasan\.so) \[0\] to $lib .*normal symbol \`_Unwind_RaiseException'" \
      "$work"/bind.*; then
      ok "$name: same output, exit $rc_ref; _Unwind_RaiseException bound to libehelf-eh"
    else
      bad "$name: _Unwind_RaiseException not bound to libehelf-eh"
      ls "$work"/bind.* && grep -h '_Unwind_' "$work"/bind.* | head -5
    fi
    rm -f "$work"/bind.*
    return
  fi
  local n; n=$(echo "$stats" | grep -oE "[0-9]+ $counter" | grep -oE '^[0-9]+')
  if [ -z "$n" ] || [ "$n" = 0 ]; then bad "$name: ours not used ($stats)"; return; fi
  ok "$name: same output, exit $rc_ref; ${stats#ehelf-eh: }"
}

# ---- linked rather than preloaded, with ehelf-eh.pc's flags ----
libs=$(sed -n 's/^Libs: -L${libdir} //p' "$2/src/eh/ehelf-eh.pc.in")
san=(); [ -n "$pre" ] && san=(-fsanitize=address,undefined)
if g++ -O2 "${san[@]}" -pthread "$src/cases.cpp" -o "$work/cases_linked" -L"$(dirname "$lib")" $libs \
  -Wl,-rpath,"$(dirname "$lib")"; then
  grep -q 'NEEDED.*libehelf-eh.so.0' <<<"$(readelf -d "$work/cases_linked")" ||
    bad "linked: libehelf-eh.so.0 is not a dependency"
  g++ -O2 "${san[@]}" -pthread "$src/cases.cpp" -o "$work/cases_plain"
  "$work/cases_plain" > "$work/plain.out" 2>&1
  EHELF_EH_STATS=1 "$work/cases_linked" > "$work/linked.out" 2> "$work/linked.err"
  if cmp -s "$work/plain.out" "$work/linked.out" && grep -qE '^ehelf-eh: [1-9][0-9]* raise' "$work/linked.err"; then
    ok "linked with ehelf-eh.pc's flags ($libs): same output; $(cut -d' ' -f2- "$work/linked.err")"
  else bad "linked: output or counters differ"; fi
else bad "linking with ehelf-eh.pc's flags"; fi

for cxx in "${compilers[@]}"; do
  cc=gcc; [ $cxx = clang++ ] && cc=clang
  for opt in -O0 -O2; do
    t="$cxx $opt"
    b="$work/${cxx}${opt}"
    mkdir -p "$b"
    flags=($opt -g -Wall -Wno-unused-result -Wno-infinite-recursion)
    $cxx "${flags[@]}" -pthread "$src/cases.cpp" -o "$b/cases" &&
      $cxx "${flags[@]}" "$src/terminate.cpp" -o "$b/terminate" &&
      $cc "${flags[@]}" -fexceptions -c "$src/c_frames.c" -o "$b/c_frames.o" &&
      $cxx "${flags[@]}" "$src/c_frames_main.cpp" "$b/c_frames.o" -o "$b/c_frames" &&
      $cxx "${flags[@]}" -pthread "$src/cancel.cpp" -o "$b/cancel" &&
      $cxx "${flags[@]}" -rdynamic "$src/forced.cpp" -o "$b/forced" &&
      $cxx "${flags[@]}" "$src/backtrace.cpp" -o "$b/backtrace" -ldl &&
      $cxx "${flags[@]}" "$src/callee_saved.cpp" -o "$b/callee_saved" &&
      $cxx "${flags[@]}" -fnon-call-exceptions "$src/signal_throw.cpp" -o "$b/signal_throw" &&
      $cxx "${flags[@]}" "$src/alloc.cpp" -o "$b/alloc" &&
      $cxx "${flags[@]}" -pthread "$src/jit.cpp" -o "$b/jit" &&
      $cc "${flags[@]}" -fexceptions -pthread "$src/c_cancel.c" -o "$b/c_cancel" &&
      $cxx "${flags[@]}" -shared -fPIC "$src/dl_lib.cpp" -o "$b/dl_lib.so" &&
      cp "$b/dl_lib.so" "$b/dl_lib2.so" &&
      $cxx "${flags[@]}" -pthread "$src/dl_threads.cpp" -o "$b/dl_threads" -ldl ||
      { bad "$t: building the programs"; continue; }
    run_pair "$t cases" raise "$b/cases"
    for how in uncaught noexcept during_unwind; do
      run_pair "$t terminate $how" bindings "$b/terminate" $how
      grep -q "terminate called" "$work/ref.err" || bad "$t $how: terminate's message not seen"
    done
    run_pair "$t C frames (-fexceptions cleanups)" resume "$b/c_frames"
    run_pair "$t pthread_exit, pthread_cancel" resume "$b/cancel"
    run_pair "$t C program: pthread_exit, pthread_cancel, cleanups" resume "$b/c_cancel"
    run_pair "$t _Unwind_ForcedUnwind" forced "$b/forced"
    run_pair "$t _Unwind_Backtrace, Find_FDE, GetCFA" backtrace "$b/backtrace"
    grep -q "same frames, FDEs and CFAs" "$work/ours.out" || bad "$t: backtrace's verdict"
    run_pair "$t callee-saved registers" raise "$b/callee_saved"
    grep -q "registers: restored" "$work/ours.out" || bad "$t: callee-saved verdict"
    run_pair "$t threads throwing while a library is loaded and unloaded" raise \
      "$b/dl_threads" "$b/dl_lib.so" "$b/dl_lib2.so"
    # JIT code whose FDEs the program registers (the __register_frame family): unwound by ours,
    # never handed to libgcc_s.
    run_pair "$t through JIT frames registered with __register_frame and its family" raise "$b/jit"
    grep -q "^ehelf-eh: .* 0 handed to libgcc" "$work/ours.all" ||
      bad "$t: a raise through registered frames was handed to libgcc_s"
    run_pair "$t through JIT frames registered through libgcc_s's own entry points" raise \
      "$b/jit" libgcc
    grep -q "^ehelf-eh: .* 0 handed to libgcc" "$work/ours.all" ||
      bad "$t: a raise through frames registered through libgcc_s was handed to it"
    # Frames only libgcc_s knows: the raise and the resumes handed to libgcc_s.
    run_pair "$t through JIT frames registered inside libgcc_s only" handed "$b/jit" libgcc-only
    if [ $cxx = g++ ]; then
      run_pair "$t throw from a signal handler (-fnon-call-exceptions)" raise "$b/signal_throw"
    else # clang accepts the flag but makes no loads throwing: terminate, for libgcc_s too
      echo "SKIP $t throw from a signal handler: clang has no -fnon-call-exceptions for loads"
    fi
    if [ -z "$pre" ]; then
      # No allocation of ours on a warmed-up throw path: the same count as libgcc_s's (one
      # __cxa_allocate_exception per throw).
      run_pair "$t allocations per throw" raise "$b/alloc"
      grep -q "^1000 throws caught, 1000 allocations$" "$work/ours.out" ||
        bad "$t: allocations: $(cat "$work/ours.out")"
    else
      echo "SKIP $t allocations: the sanitizers replace malloc"
    fi
    if [ $opt = -O2 ]; then
      # The handler's frame keeps its values in all six callee-saved registers.
      saved=$(objdump -d --no-show-raw-insn --disassemble=_Z7catcherl "$b/callee_saved" |
        grep -oE 'push +%(rbx|rbp|r12|r13|r14|r15)' | sort -u | wc -l)
      [ "$saved" = 6 ] && ok "$t: catcher saves rbx, rbp, r12-r15" ||
        bad "$t: catcher saves $saved callee-saved registers, not 6"
    fi
  done
done
# ---- a real program that no one here wrote: gdb, whose errors are C++ exceptions ----
if ! command -v gdb > /dev/null; then
  echo "SKIP gdb: not installed"
elif [ -n "$pre" ]; then
  echo "SKIP gdb: not under AddressSanitizer's runtime (gdb is not built with it)"
else
  g++ -O0 -g -pthread "$src/cases.cpp" -o "$work/cases_g"
  gdb_args=(-nx -batch -ex 'print nosuchvar' -ex 'print 1 + 2' -ex 'break thrower' -ex 'run > /dev/null 2>&1'
    -ex backtrace -ex 'print depth' -ex 'frame 99' -ex 'print *(int*)0' -ex 'ptype std::runtime_error'
    -ex 'info symbol 0' -ex 'list nosuchfunction' -ex finish -ex delete -ex continue)
  # Thread and process ids, and addresses, differ from run to run; the inferior's output goes to
  # /dev/null (it would interleave with gdb's: its counters line at its exit, written while gdb
  # writes "[Inferior 1 (process N) exited normally]", once split that line).
  gdb_filter() { grep -v '^\[\|process [0-9]*\|Thread 0x\|^ehelf-eh: ' "$1" | sed 's/0x[0-9a-f]*/ADDR/g'; }
  (gdb "${gdb_args[@]}" "$work/cases_g" > "$work/gdb_ref.txt" 2>&1)
  (EHELF_EH_STATS=1 LD_PRELOAD="$lib" gdb "${gdb_args[@]}" "$work/cases_g" > "$work/gdb_ours.txt" 2>&1)
  # The last counters line is gdb's own (the inferior's comes first, at its exit).
  gdb_stats=$(grep '^ehelf-eh: ' "$work/gdb_ours.txt" | tail -1)
  if ! diff <(gdb_filter "$work/gdb_ref.txt") <(gdb_filter "$work/gdb_ours.txt") > "$work/gdb.diff"; then
    bad "gdb: output differs"; head -20 "$work/gdb.diff"
  elif ! grep -qE '^ehelf-eh: [1-9][0-9]* raise' <<< "$gdb_stats"; then
    bad "gdb: no throw of gdb's through ours ($gdb_stats)"
  else
    ok "gdb's errors (C++ exceptions) and a debugging session: same output; gdb: ${gdb_stats#ehelf-eh: }"
  fi
fi
exit $fail
