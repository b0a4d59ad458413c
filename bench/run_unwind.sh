#!/usr/bin/env bash
# In-process unwinding benchmark (bench/unwind/): ehelf's unwinder in each backend against
# libunwind (unw_backtrace, unw_step), libgcc's _Unwind_Backtrace, glibc's backtrace(), LLVM's
# libunwind, elfutils' libdwfl and a frame-pointer walk, on qsort call chains of depth 10/30/100,
# hot and cold. Writes bench/results/unwind.json and bench/results/unwind.md.
#
# Steps: installs what is missing (libunwind-dev, libdw-dev, valgrind, strace); builds the release
# configuration (build/); unpacks LLVM's libunwind from the libunwind-14-dev .deb (it conflicts
# with libunwind-dev, so it is never installed: its static library goes into its own binary);
# builds the harness (build-unwind/, its own CMake project); compiles eh_elfs for libc and the
# harness into a temporary $EHELF_CACHE; then runs
#   1. the timings (ns/frame),
#   2. each unwinder under callgrind, collection toggled around its unwinds only (instructions),
#   3. each unwinder under strace (system calls per unwind),
# and merges them (bench/unwind/report.py).
#
# Environment: UNWIND_COLD_SAMPLES (250), UNWIND_HOT_ROUNDS (21), UNWIND_SKIP_CALLGRIND=1,
# UNWIND_SKIP_STRACE=1. Arguments go to the timing runs of the harness.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="bench/run_unwind.sh${*:+ $*}"

need=()
for p in libunwind-dev libdw-dev valgrind strace python3 cmake g++; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2

# LLVM's libunwind, unpacked (not installed) once into build-unwind/llvm-unwind.
llvm_root="$repo/build-unwind/llvm-unwind"
if [ ! -f "$llvm_root/usr/lib/llvm-14/lib/libunwind.a" ]; then
  tmp="$(mktemp -d)"
  chmod 755 "$tmp" # apt-get download runs as _apt where it can
  if ! (cd "$tmp" && apt-get download libunwind-14-dev >/dev/null 2>&1); then
    $SUDO apt-get update -qq
    (cd "$tmp" && apt-get download libunwind-14-dev)
  fi
  mkdir -p "$llvm_root"
  dpkg -x "$tmp"/libunwind-14-dev_*.deb "$llvm_root"
  rm -rf "$tmp"
fi

cmake -S bench/unwind -B build-unwind -DEHELF_BUILD_DIR="$repo/build" -DLLVM_UNWIND_ROOT="$llvm_root"
cmake --build build-unwind -j2
bin="$repo/build-unwind/bin"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export EHELF_CACHE="$work/cache"
mkdir -p "$EHELF_CACHE"
libc="$(ldd "$bin/unwind_bench" | awk '/libc\.so\.6/ {print $3}')"
echo "compiling eh_elfs for $libc and unwind_bench into $EHELF_CACHE"
./build/bin/ehelf compile --cache -j2 "$libc" "$bin/unwind_bench"

samples="${UNWIND_COLD_SAMPLES:-250}"
rounds="${UNWIND_HOT_ROUNDS:-21}"
echo "timings"
"$bin/unwind_bench" --cold-samples "$samples" --hot-rounds "$rounds" --json "$work/time.json" "$@"
"$bin/unwind_bench_llvm" --cold-samples "$samples" --hot-rounds "$rounds" --json "$work/time_llvm.json" "$@"
"$bin/unwind_bench_capi" --cold-samples "$samples" --hot-rounds "$rounds" --json "$work/time_capi.json" "$@"

run_each() { # run_each KIND: every peer of the three binaries, one process each
  local kind="$1" i=0 b peer
  for b in unwind_bench unwind_bench_llvm unwind_bench_capi; do
    while IFS= read -r peer; do
      i=$((i + 1))
      echo "$kind: $peer"
      case "$kind" in
      callgrind)
        valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$work/cg.$i.out" \
          "$bin/$b" --callgrind --only "$peer" --json "$work/cg.$i.json" >/dev/null 2>"$work/cg.$i.log" \
          || { echo "  failed: see below"; tail -5 "$work/cg.$i.log"; }
        ;;
      strace)
        strace -f -qq -o "$work/st.$i.trace" -e 'trace=all' \
          "$bin/$b" --syscalls --only "$peer" --cg-hot-iters 100 --cg-cold-samples 20 \
          --json "$work/st.$i.json" >/dev/null 2>"$work/st.$i.log" \
          || { echo "  failed: see below"; tail -5 "$work/st.$i.log"; }
        ;;
      esac
    done < <("$bin/$b" --list)
  done
}
[ "${UNWIND_SKIP_CALLGRIND:-0}" = 1 ] || run_each callgrind
[ "${UNWIND_SKIP_STRACE:-0}" = 1 ] || run_each strace

mkdir -p bench/results
python3 bench/unwind/report.py --work "$work" --command "$command_line" \
  --json bench/results/unwind.json --md bench/results/unwind.md
cat bench/results/unwind.md
