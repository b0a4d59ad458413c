#!/usr/bin/env bash
# libehelf-unwind, libunwind's C API: install the build to a temporary prefix, build small
# libunwind-using programs (tests/capi/) unchanged against the real libunwind and against ours
# (pkg-config ehelf-unwind), run both and compare what they print: local walks through qsort and
# through a signal frame, unw_backtrace (also from several threads at once and from signal
# handlers interrupting it), signal frames (unw_is_signal_frame, unw_get_save_loc,
# unw_get_proc_name, walks from a handler's ucontext), a library dlopened after the first walk,
# remote walks of a ptrace-stopped child (our accessors, libunwind-ptrace's, and bare
# memory+register accessors),
# plus a check that local walks do not allocate once initialised, and binary compatibility
# (compiled with libunwind's headers, linked with ours).
# Usage: test_capi.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
SRC=$(cd "${2:?source dir}" && pwd)
CAPI="$SRC/tests/capi"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- install ----
cmake --install "$BUILD" --prefix "$TMP/prefix" > "$TMP/install.log" 2>&1 ||
  { cat "$TMP/install.log"; fail "cmake --install"; }
for f in lib/libehelf-unwind.so lib/pkgconfig/ehelf-unwind.pc include/ehelf/libunwind.h \
         include/ehelf/libunwind-ptrace.h include/ehelf/eh_elf.h \
         include/ehelf/libunwind/libunwind.h lib/libehelf_runtime.a; do
  [ -e "$TMP/prefix/$f" ] || fail "not installed: $f"
done
export PKG_CONFIG_PATH="$TMP/prefix/lib/pkgconfig"
OURS=$(pkg-config --cflags --libs ehelf-unwind) || fail "pkg-config ehelf-unwind"
echo "pkg-config ehelf-unwind: $OURS"
export LD_LIBRARY_PATH="$TMP/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Only libunwind's API is exported.
extra=$(nm -D --defined-only "$TMP/prefix/lib/libehelf-unwind.so" | awk '{print $3}' |
        grep -Ev '^(unw_|_ULx86_64_|_Ux86_64_|_UPT_|ehelf_unw_)' || true)
[ -z "$extra" ] || fail "libehelf-unwind exports more than libunwind's API: $extra"

# The library unwinds; it never generates or builds code: none of the compiler is linked in
# (the runtime depends on src/eh_elf, the eh_elf ABI helpers, not on src/compile).
compiler=$(nm -C "$BUILD/lib/libehelf-unwind.so" | grep -E \
  'generate_eh_elf_source|build_shared_object|compile_module|translate_expression' || true)
[ -z "$compiler" ] || fail "libehelf-unwind links compiler code: $compiler"

# ---- ours ----
CFLAGS=(-O2 -g -Wall -Wextra -Werror)
# A sanitized build (EHELF_SANITIZE): the programs need the sanitizer runtime first, and the
# allocation check, which replaces malloc, cannot run.
sanitized=0
# (Whole outputs before grep -q: under pipefail a producer still writing when grep -q exits dies
# of SIGPIPE, and the pipeline fails whatever grep found.)
if grep -q 'libasan' <<<"$(readelf -d "$TMP/prefix/lib/libehelf-unwind.so")"; then
  sanitized=1
  CFLAGS+=(-fsanitize=address,undefined)
  export ASAN_OPTIONS=detect_leaks=0 # replaced module maps are deliberately never freed
fi
cc "${CFLAGS[@]}" -o "$TMP/local_ours" "$CAPI/libunwind_user.c" $OURS -pthread
cc "${CFLAGS[@]}" -o "$TMP/remote_ours" "$CAPI/remote_user.c" $OURS
"$TMP/local_ours" > "$TMP/local_ours.txt" || fail "local walk (ours) exited with $?"
cat "$TMP/local_ours.txt"

# Sanity without a reference: the frames we expect, in order, and the signal frame.
expect_order() { # LABEL NAME...
  local label=$1 names
  shift
  names=$(grep "^WALK $label #" "$TMP/local_ours.txt" | sed -E 's/.* name=([^+]*)\+.*/\1/' |
          tr '\n' ' ')
  local rest=" $names" n alt found
  for n in "$@"; do # NAME, or NAME|NAME for aliases of one function
    found=
    for alt in ${n//|/ }; do
      if [[ "$rest" == *" $alt "* ]]; then
        found=$alt
        break
      fi
    done
    [ -n "$found" ] || fail "walk '$label' lacks $n in order: $names"
    rest=${rest#* $found }
    rest=" $rest"
  done
}
expect_order qsort walk_here level3 compare level2 level1 main
# gsignal and raise are one function: .dynsym names it gsignal, libc6-dbg's .symtab raise.
expect_order signal walk_here on_sigusr1 'gsignal|raise' signal_level1 main
[ "$(grep -c '^WALK signal .* sig=1$' "$TMP/local_ours.txt")" = 1 ] ||
  fail "the signal walk should have exactly one signal frame"
expect_order coroutine walk_here coroutine_level coroutine_entry
grep -q '^BT qsort #0 main+' "$TMP/local_ours.txt" || fail "unw_backtrace starts at its caller"
grep -q '^MT .* calls: equal to the cursor walks$' "$TMP/local_ours.txt" ||
  fail "unw_backtrace from several threads differs from the cursor walks"
grep -q "^MT signal handlers' unw_backtrace: all reach the outermost frame$" \
  "$TMP/local_ours.txt" || fail "unw_backtrace in signal handlers stops short"
grep -qx 'REGS regs_outer rbx=0xb0b0 r12=0x1212 r13=0x1313 r14=0x1414 r15=0x1515' \
  "$TMP/local_ours.txt" || fail "a caller's callee-saved registers are not restored"

if [ $sanitized = 0 ]; then
  cc "${CFLAGS[@]}" -o "$TMP/noalloc_ours" "$CAPI/no_alloc.c" $OURS -pthread
  "$TMP/noalloc_ours" | tee "$TMP/noalloc.txt" || fail "local walks allocate (see above)"
else
  echo "SKIP no-alloc check: sanitizers replace malloc"
fi

# Stack taken by a walk (tests/capi/stack_use.c, on a painted alternate signal stack): at most
# 4 KiB on the first and later calls of unw_backtrace and of a cursor walk, and both walks work
# in a handler on an 8 KiB alternate stack (the legacy SIGSTKSZ). Not under sanitizers, whose
# frames are larger and which walk on the caller's stack.
if [ $sanitized = 0 ]; then
  cc "${CFLAGS[@]}" -Wl,-z,now -o "$TMP/stack_use" "$CAPI/stack_use.c" $OURS
  "$TMP/stack_use" measure > "$TMP/stack_use.txt" || fail "stack_use measure exited with $?"
  cat "$TMP/stack_use.txt"
  [ "$(grep -c '^USE ' "$TMP/stack_use.txt")" = 2 ] || fail "stack_use measured nothing"
  awk '/^USE / { split($3, f, "="); split($4, l, "="); if (f[2] > 4096 || l[2] > 4096) bad = 1 }
       END { exit bad }' "$TMP/stack_use.txt" || fail "a walk takes more than 4 KiB of stack"
  timeout 30 "$TMP/stack_use" small > "$TMP/stack_small.txt" ||
    fail "a walk on an 8 KiB alternate signal stack crashed (exit $?)"
  cat "$TMP/stack_small.txt"
  [ "$(grep -cE '^SMALL (backtrace|cursor) frames=([5-9]|[1-9][0-9])$' "$TMP/stack_small.txt")" = 2 ] ||
    fail "a walk on an 8 KiB alternate signal stack stops short"
else
  echo "SKIP stack use: sanitizers' frames are larger"
fi

# The profiler's scenario: the first unwind of the process, and of each thread, inside a 10 kHz
# SIGPROF handler that interrupts malloc/free loops (unw_backtrace, and unw_init_local2 +
# unw_step; on the thread's stack and on an alternate signal stack). No allocator call may happen
# in a handler (counted by interposing malloc & co., except under sanitizers, which own the
# allocator), and no run may crash or hang. EHELF_LONG_TESTS=1: 100 runs of each.
count=1
[ $sanitized = 0 ] || count=0
cc "${CFLAGS[@]}" -DCOUNT_ALLOCATIONS=$count -o "$TMP/first_in_handler" \
  "$CAPI/first_in_handler.c" $OURS -pthread -ldl
runs=2
[ "${EHELF_LONG_TESTS:-0}" = 1 ] && runs=100
cc -O2 -shared -fPIC -o "$TMP/libfih_lib.so" "$CAPI/dlopen_lib.c"
cc -O2 -shared -fPIC -o "$TMP/libfih_plugin.so" "$CAPI/dlopen_lib.c"
dl="dlopen $TMP/libfih_lib.so $TMP/libfih_plugin.so"
variants=("backtrace 0" "backtrace 3" "backtrace 2 altstack" "backtrace 2 $dl" "backtrace 2 preload"
          "step 0" "step 3" "step 2 altstack" "step 2 $dl" "step 2 preload")
for variant in "${variants[@]}"; do
  for ((i = 0; i < runs; ++i)); do
    # shellcheck disable=SC2086
    timeout 30 "$TMP/first_in_handler" $variant > "$TMP/fih.txt" 2>&1 ||
      { cat "$TMP/fih.txt"; fail "first unwind in a SIGPROF handler ($variant, run $i)"; }
  done
  echo "first in handler ($variant, $runs runs): $(tr '\n' ' ' < "$TMP/fih.txt")"
done

# A library loaded after the first walk is unwound through (the module list is re-read).
cc -O2 -shared -fPIC -o "$TMP/libdlopen_lib.so" "$CAPI/dlopen_lib.c"
cc "${CFLAGS[@]}" -o "$TMP/dlopen_ours" "$CAPI/dlopen_user.c" $OURS -ldl
"$TMP/dlopen_ours" "$TMP/libdlopen_lib.so" > "$TMP/dlopen.txt" || fail "dlopen test failed"
[ "$(grep -A2 'name=walk$' "$TMP/dlopen.txt" | grep -c 'name=dlopen_lib_call$')" = 2 ] ||
  { cat "$TMP/dlopen.txt"; fail "walks do not go through the library loaded after init"; }
[ "$(grep -A1 'name=dlopen_lib_call$' "$TMP/dlopen.txt" | grep -c 'name=main$')" = 2 ] ||
  { cat "$TMP/dlopen.txt"; fail "walks stop in the library loaded after init"; }
[ "$(grep -c '^DLOPEN BT same$' "$TMP/dlopen.txt")" = 3 ] ||
  { cat "$TMP/dlopen.txt"; fail "unw_backtrace differs from the cursor walk around a dlopen"; }
echo "dlopen: walks go through a library loaded after initialisation"

# A plugin dlclosed and replaced by another library at its address (tests/capi/reload_user.c,
# reload_lib.c built twice), walked from a signal handler, where unw_flush_cache is not
# allowed: every walk must reach main through what is loaded now (the old library's rows
# truncated half of them before). 100 rounds, 200 libraries: more than the 64 slots for
# libraries found late, so withdrawn slots must be given to new ones (64 of 200 reached main
# while they were not).
cc -O2 -shared -fPIC -o "$TMP/libreload_a.so" "$CAPI/reload_lib.c"
cc -O2 -shared -fPIC -DDEEP -o "$TMP/libreload_b.so" "$CAPI/reload_lib.c"
cc "${CFLAGS[@]}" -rdynamic -o "$TMP/reload_ours" "$CAPI/reload_user.c" $OURS -ldl
timeout 60 "$TMP/reload_ours" "$TMP/libreload_a.so" "$TMP/libreload_b.so" 100 > "$TMP/reload.txt" ||
  { cat "$TMP/reload.txt"; fail "reload_user exited with $?"; }
tail -1 "$TMP/reload.txt"
if grep -q '^REACHED .* (0 at a reused address)$' "$TMP/reload.txt"; then
  echo "SKIP reload: no library was mapped where the previous one was"
else
  grep -qx 'REACHED 200 of 200 walks reached main (.*)' "$TMP/reload.txt" ||
    { cat "$TMP/reload.txt"; fail "walks through a library replaced at its address stop short"; }
fi

remote_ok=1
for mode in upt custom bare; do
  "$TMP/remote_ours" $mode > "$TMP/remote_ours_$mode.txt" || true
  if [ "$(grep -c '^REMOTE #' "$TMP/remote_ours_$mode.txt")" -lt 6 ]; then
    cat "$TMP/remote_ours_$mode.txt"
    if grep -q "child did not stop" "$TMP/remote_ours_$mode.txt"; then
      echo "SKIP remote: ptrace is not permitted here"
      remote_ok=0
      break
    fi
    fail "remote walk ($mode) is too short"
  fi
done
[ $remote_ok = 1 ] && cat "$TMP/remote_ours_upt.txt"

# ---- the real libunwind, if installed ----
if ! echo 'int main(void){return 0;}' | cc -x c - -o "$TMP/probe" -lunwind 2>/dev/null; then
  echo "SKIP the comparisons with libunwind (the rest of this test): libunwind-dev is not installed (scripts/setup.sh installs it)"
  exit 0
fi
cc "${CFLAGS[@]}" -o "$TMP/local_real" "$CAPI/libunwind_user.c" -lunwind -pthread
"$TMP/local_real" > "$TMP/local_real.txt" || fail "local walk (libunwind) exited with $?"
python3 "$CAPI/compare_walks.py" "$TMP/local_real.txt" "$TMP/local_ours.txt" "$TMP/local_real"

# unw_get_proc_info on C++ frames (handler: the personality routine, read through the CIE's
# indirect pointer), against libunwind's answers.
c++ -O2 -g -Wall -Werror $([ $sanitized = 1 ] && echo -fsanitize=address,undefined) \
  -o "$TMP/proc_info_ours" "$CAPI/proc_info_cxx.cpp" $OURS -ldl
c++ -O2 -g -Wall -Werror $([ $sanitized = 1 ] && echo -fsanitize=address,undefined) \
  -o "$TMP/proc_info_real" "$CAPI/proc_info_cxx.cpp" -lunwind -ldl
"$TMP/proc_info_ours" > "$TMP/proc_info_ours.txt" || fail "proc_info_cxx (ours) exited with $?"
"$TMP/proc_info_real" > "$TMP/proc_info_real.txt" || fail "proc_info_cxx (libunwind) exited with $?"
grep -q "FRAME with_try lsda=1 handler=__gxx_personality_v0" "$TMP/proc_info_real.txt" ||
  fail "libunwind itself does not give the personality: $(cat "$TMP/proc_info_real.txt")"
diff "$TMP/proc_info_real.txt" "$TMP/proc_info_ours.txt" ||
  fail "unw_get_proc_info on C++ frames differs from libunwind's"
echo "unw_get_proc_info: lsda and handler (the personality routine) as libunwind gives them"

# Signal frames (tests/capi/signal_frames.c), against libunwind's answers in a SA_SIGINFO handler:
# unw_is_signal_frame (after unw_step and after unw_get_proc_info), unw_get_proc_name on every
# frame (__restore_rt included), unw_get_save_loc of rbx, rbp, rsp, r12-r15 and rip, and walks
# from the handler's ucontext (unw_init_local and unw_init_local2, also interrupting a busy loop).
# One difference is by design: a caller's rsp is the CFA, held in no save slot; we answer
# UNW_SLT_NONE where libunwind gives an address that does not hold it ("stale"), counted.
cc "${CFLAGS[@]}" -o "$TMP/signal_frames_ours" "$CAPI/signal_frames.c" $OURS
cc "${CFLAGS[@]}" -o "$TMP/signal_frames_real" "$CAPI/signal_frames.c" -lunwind
"$TMP/signal_frames_ours" > "$TMP/signal_frames_ours.txt" || fail "signal_frames (ours) exited with $?"
"$TMP/signal_frames_real" > "$TMP/signal_frames_real.txt" ||
  fail "signal_frames (libunwind) exited with $?"
cat "$TMP/signal_frames_ours.txt"
! grep -q '=stale' "$TMP/signal_frames_ours.txt" ||
  fail "a save location of ours does not hold the register's value"
grep -q '^FRAME getcontext #1 .* sig=0/1 name=ok ' "$TMP/signal_frames_ours.txt" ||
  fail "the trampoline frame (__restore_rt) is not a named signal frame once looked up"
grep -q '^FRAME getcontext #2 .* sig=1/0 .* rip=sigctx+168$' "$TMP/signal_frames_ours.txt" ||
  fail "the interrupted frame does not come from the signal context"
[ "$(grep -c '^FRAME ucontext ' "$TMP/signal_frames_ours.txt")" -ge 5 ] ||
  fail "the walk from a signal handler's ucontext stops short"
stale=$(grep -o 'rsp=stale' "$TMP/signal_frames_real.txt" | wc -l)
normalize() { # the stale rsp answers, and the names where libc has no debug file; ENTRY apart
  sed -e 's/rsp=stale/rsp=-/' "$1" | { [ "$libc_debug" = 1 ] && cat || sed -e 's/ name=[a-z]*//'; } |
    awk '/^ENTRY/ { next } /^ASYNC/ { if (!seen[$0]++) print; next } { print }'
}
# A signal on a function's first instruction (signal_frames.c's g_at_entry): libunwind's
# unw_init_local looks up the pc before it and stops there; ours walks on to _start.
entries_real=$(grep -c '^ENTRY' "$TMP/signal_frames_real.txt" || true)
if grep '^ENTRY' "$TMP/signal_frames_ours.txt" | grep -v 'chain=spin_outer,main,_start$'; then
  fail "a walk from a signal on a function's first instruction stops short"
fi
libc_debug=0
libc_id=$(readelf -n "$(ldd "$TMP/signal_frames_ours" | awk '/libc\.so\.6/ {print $3}')" |
          awk '/Build ID/ {print $3}')
[ -n "$libc_id" ] && [ -e "/usr/lib/debug/.build-id/${libc_id:0:2}/${libc_id:2}.debug" ] &&
  libc_debug=1
[ $libc_debug = 1 ] ||
  echo "NOTE: no debug file for libc (libc6-dbg): names of static libc functions not compared"
diff <(normalize "$TMP/signal_frames_real.txt") <(normalize "$TMP/signal_frames_ours.txt") ||
  fail "signal frames differ from libunwind's"
echo "signal frames: as libunwind, except $stale rsp save locations libunwind gives that do not hold rsp;" \
  "$entries_real of libunwind's walks and $(grep -c '^ENTRY' "$TMP/signal_frames_ours.txt" || true)" \
  "of ours from a signal on a function's first instruction not compared"

# A SIGSEGV on a function's first instruction (tests/capi/entry_fault.c), right after another
# function's FDE ("packed") or after a padding byte ("padded"): every walk from the handler
# (unw_init_local and unw_init_local2 on its ucontext, unw_getcontext through the signal frame)
# gives gdb's backtrace at the fault. libunwind looks up the byte before the fault in the packed
# layout (it skips main, or stops at once with unw_init_local), and unw_init_local's walk stops
# in the padded one: ours must equal its walks where they are right.
cc "${CFLAGS[@]}" -o "$TMP/entry_fault_ours" "$CAPI/entry_fault.c" $OURS -ldl
cc "${CFLAGS[@]}" -o "$TMP/entry_fault_real" "$CAPI/entry_fault.c" -lunwind -ldl
for layout in packed padded; do
  "$TMP/entry_fault_ours" $layout > "$TMP/entry_fault_ours.txt" ||
    fail "entry_fault $layout (ours) exited with $?"
  "$TMP/entry_fault_real" $layout > "$TMP/entry_fault_real.txt" ||
    fail "entry_fault $layout (libunwind) exited with $?"
  cat "$TMP/entry_fault_ours.txt"
  gdb_chain=$(timeout 60 gdb -nx -batch -ex run -ex bt --args "$TMP/entry_fault_real" $layout \
                2>/dev/null | sed -nE 's/^#[0-9]+ +(0x[0-9a-f]+ in )?([A-Za-z_][A-Za-z0-9_]*) .*/\2/p' |
                sed '/^main$/q' | paste -sd, - || true)
  if [[ "$gdb_chain" == crash_* ]]; then
    [ "$(grep -c "^WALK .* chain=$gdb_chain\$" "$TMP/entry_fault_ours.txt")" = 3 ] ||
      fail "a walk from a fault on a function's first instruction ($layout) differs from gdb's" \
        "backtrace $gdb_chain"
    echo "entry fault ($layout): the 3 walks give gdb's backtrace $gdb_chain"
  else
    echo "SKIP entry fault ($layout) against gdb: gdb did not stop at the fault"
  fi
  while read -r label chain; do
    [[ "$chain" == *,main ]] || continue # libunwind's wrong walks are not compared
    grep -qx "WALK $label $chain" "$TMP/entry_fault_ours.txt" ||
      fail "entry fault ($layout): libunwind's $label walk ($chain) differs from ours"
  done < <(sed -n 's/^WALK //p' "$TMP/entry_fault_real.txt")
  echo "entry fault ($layout), libunwind: $(sed -n 's/^WALK //p' "$TMP/entry_fault_real.txt" |
    tr '\n' ' ')"
done

# unw_resume (tests/capi/resume_user.c): a frame two calls up resumed with rax set (its
# callee-saved registers restored from the frames skipped), and a faulting load skipped from a
# SIGSEGV handler by setting rip, through the signal frame (twice: the signal mask restored)
# and from the handler's ucontext. Equal to libunwind's output where libunwind resumes; from the
# ucontext, libunwind 1.6 faults in its setcontext: ours must give the values the handler set.
cc "${CFLAGS[@]}" -o "$TMP/resume_ours" "$CAPI/resume_user.c" $OURS
cc "${CFLAGS[@]}" -o "$TMP/resume_real" "$CAPI/resume_user.c" -lunwind
for mode in up frame ucontext; do
  timeout 30 "$TMP/resume_ours" $mode > "$TMP/resume_ours.txt" ||
    { cat "$TMP/resume_ours.txt"; fail "unw_resume ($mode, ours) exited with $?"; }
  cat "$TMP/resume_ours.txt"
  if timeout 30 "$TMP/resume_real" $mode > "$TMP/resume_real.txt" 2>&1; then
    diff "$TMP/resume_real.txt" "$TMP/resume_ours.txt" || fail "unw_resume ($mode) differs from libunwind's"
  else
    printf 'RESUME %s: load %d gave %d\n' $mode 0 101 $mode 1 102 > "$TMP/resume_expected.txt"
    echo "RESUME $mode: done" >> "$TMP/resume_expected.txt"
    diff "$TMP/resume_expected.txt" "$TMP/resume_ours.txt" ||
      fail "unw_resume ($mode) does not give the registers the handler set"
    echo "unw_resume ($mode): libunwind fails ($(tail -1 "$TMP/resume_real.txt"))"
  fi
done

# A program without a usable .eh_frame_hdr search table (tests/capi/no_hdr_user.c): linked with
# --no-eh-frame-hdr (no PT_GNU_EH_FRAME), where nongnu libunwind reads .eh_frame from the file's
# section headers: our walks must equal its; or with the header's table removed (its count and
# table encodings set to DW_EH_PE_omit, as GNU ld writes a header it cannot fill), where libgcc
# searches .eh_frame: unw_backtrace must give glibc's backtrace() (libgcc's unwinder).
omit_search_table() { # FILE
  python3 - "$1" <<'PY'
import re, subprocess, sys
path = sys.argv[1]
out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
offset = int(re.search(r"\.eh_frame_hdr\s+PROGBITS\s+\S+\s+([0-9a-f]+)", out).group(1), 16)
data = bytearray(open(path, "rb").read())
data[offset + 2] = data[offset + 3] = 0xff  # fde_count_enc, table_enc: DW_EH_PE_omit
open(path, "wb").write(data)
PY
}
expected_chain='level3,level2,level1,main'
for variant in no-eh-frame-hdr no-search-table; do
  ldflags=(-rdynamic)
  [ $variant = no-eh-frame-hdr ] && ldflags+=(-Wl,--no-eh-frame-hdr)
  cc "${CFLAGS[@]}" "${ldflags[@]}" -o "$TMP/nohdr_ours" "$CAPI/no_hdr_user.c" $OURS -ldl
  cc "${CFLAGS[@]}" "${ldflags[@]}" -o "$TMP/nohdr_real" "$CAPI/no_hdr_user.c" -lunwind -ldl
  if [ $variant = no-eh-frame-hdr ]; then
    ! grep -q GNU_EH_FRAME <<<"$(readelf -lW "$TMP/nohdr_ours")" || fail "--no-eh-frame-hdr left a header"
  else
    omit_search_table "$TMP/nohdr_ours"
    omit_search_table "$TMP/nohdr_real"
  fi
  "$TMP/nohdr_ours" > "$TMP/nohdr_ours.txt" || fail "no_hdr_user ($variant, ours) exited with $?"
  "$TMP/nohdr_real" > "$TMP/nohdr_real.txt" || fail "no_hdr_user ($variant, libunwind) exited with $?"
  cat "$TMP/nohdr_ours.txt"
  for walk in cursor backtrace; do
    grep -qE "^CHAIN $walk frames=[0-9]+ chain=$expected_chain\$" "$TMP/nohdr_ours.txt" ||
      fail "$variant: the $walk walk does not reach main"
  done
  if [ $variant = no-eh-frame-hdr ]; then
    diff <(grep '^CHAIN' "$TMP/nohdr_real.txt") <(grep '^CHAIN' "$TMP/nohdr_ours.txt") ||
      fail "$variant: our walks differ from libunwind's"
    echo "$variant: walks as libunwind's"
  elif [ $sanitized = 1 ]; then
    # AddressSanitizer intercepts backtrace() (its own unwinder, its interceptor's frame first):
    # the oracle is not glibc's there.
    echo "SKIP $variant: backtrace() is AddressSanitizer's in a sanitizer build, not libgcc's"
  else
    grep -qE '^GLIBC frames=([5-9]|[1-9][0-9]) same=yes$' "$TMP/nohdr_ours.txt" ||
      fail "$variant: unw_backtrace differs from glibc's backtrace (libgcc)"
    echo "$variant: unw_backtrace as glibc's backtrace (libgcc); libunwind:" \
      "$(grep '^CHAIN cursor' "$TMP/nohdr_real.txt")"
  fi
done

# Binary compatibility: compiled with libunwind's headers, linked with ours.
cc "${CFLAGS[@]}" -c -o "$TMP/local_binary.o" "$CAPI/libunwind_user.c"
cc "${CFLAGS[@]}" -o "$TMP/local_binary" "$TMP/local_binary.o" -L"$TMP/prefix/lib" -lehelf-unwind \
  -pthread
"$TMP/local_binary" > "$TMP/local_binary.txt" || fail "local walk (binary compat) exited with $?"
diff "$TMP/local_ours.txt" "$TMP/local_binary.txt" ||
  fail "built with libunwind's headers, the program walks differently"
echo "binary compatibility: same output with libunwind's headers"

if [ $sanitized = 0 ]; then
  cc "${CFLAGS[@]}" -o "$TMP/noalloc_real" "$CAPI/no_alloc.c" -lunwind -pthread
  echo "libunwind, for reference: $("$TMP/noalloc_real" | tail -1)"
fi

if [ $remote_ok = 1 ]; then
  if cc "${CFLAGS[@]}" -o "$TMP/remote_real" "$CAPI/remote_user.c" -lunwind-ptrace \
       -lunwind-generic 2>"$TMP/remote_real.log"; then
    "$TMP/remote_real" upt > "$TMP/remote_real.txt" || fail "remote walk (libunwind) failed"
    for mode in upt custom bare; do
      python3 "$CAPI/compare_walks.py" "$TMP/remote_real.txt" "$TMP/remote_ours_$mode.txt" \
        "$TMP/remote_real"
    done
  else
    cat "$TMP/remote_real.log"
    echo "SKIP remote comparison: libunwind-ptrace is not available"
  fi
fi
echo "OK"
