#!/usr/bin/env bash
# C++ throw-and-catch through 1, 10 and 100 frames, with and without a destructor in each frame,
# in 1 and 2 threads: libgcc_s (as built), libehelf-eh, LLVM's libunwind 14 and nongnu libunwind
# (each preloaded),
# side by side in one run: nanoseconds, and instructions (callgrind); and the costs of frames
# registered at run time (__register_frame). Writes bench/results/eh.md.
# Environment: EH_BUILD, a build directory where the target ehelf_eh is built (default: build/,
# configured and built here in the release configuration).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if [ -z "${EH_BUILD:-}" ]; then
  source bench/common/prepare.sh
  bench_prepare ehelf_eh
  EH_BUILD=build
fi
lib="$(cd "$EH_BUILD" && pwd)/lib/libehelf-eh.so.0"
llvm=/usr/lib/llvm-14/lib/libunwind.so.1 # Debian's libunwind-14 package
nongnu=/usr/lib/x86_64-linux-gnu/libunwind.so.8 # Debian's libunwind8 (libunwind-dev's)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -pthread bench/eh/throw_bench.cpp -o "$tmp/throw_bench"

names=(libgcc_s ehelf)
preloads=("" "$lib")
if [ -f "$llvm" ]; then names+=("LLVM libunwind 14"); preloads+=("$llvm"); fi
if [ -f "$nongnu" ]; then
  names+=("nongnu libunwind $(dpkg-query -W -f='${Version}' libunwind8 2> /dev/null | cut -d- -f1)")
  preloads+=("$nongnu")
fi
# Each unwinder must really be the one throwing: the loader's binding of _Unwind_RaiseException.
for i in "${!names[@]}"; do
  [ -n "${preloads[$i]}" ] || continue
  LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/bind" LD_PRELOAD="${preloads[$i]}" \
    "$tmp/throw_bench" 1 0 1 10 1 > /dev/null
  grep -q "to ${preloads[$i]} .*\`_Unwind_RaiseException'" "$tmp"/bind.* ||
    { echo "${names[$i]}: _Unwind_RaiseException is not bound to ${preloads[$i]}" >&2; exit 1; }
  rm -f "$tmp"/bind.*
done

out=bench/results/eh.md
{
  echo "Date: $(date -u '+%Y-%m-%d %H:%M') UTC. Kernel $(uname -r), $(nproc) vCPUs, load average" \
    "$(cut -d' ' -f1 /proc/loadavg) at the start. Command: \`bash bench/run_eh.sh\`." \
    "ehelf $(git rev-parse --short HEAD), g++ $(g++ -dumpfullversion) -O2."
  echo
  echo "Each cell: the median of 7 rounds of nanoseconds per throw-and-catch (\`bench/eh/throw_bench.cpp\`:" \
    "\`throw int\` through DEPTH frames, caught in the outermost; a destructor in each frame or none)," \
    "after 200 warm-up throws; with 2 threads, each thread's median, averaged. Per frame: the time" \
    "above depth 1's, divided by the frames added. ×: the time relative to libgcc_s's in the same row."
  echo
  echo "| threads | depth | destructors | unwinder | ns per throw | ns per frame | × libgcc_s |"
  echo "|---:|---:|---|---|---:|---:|---:|"
} > "$tmp/table"
declare -A base
for threads in 1 2; do
  for dtor in 0 1; do
    for depth in 1 10 100; do
      declare -A ns=()
      for i in "${!names[@]}"; do
        ns[$i]=$(LD_PRELOAD="${preloads[$i]}" "$tmp/throw_bench" $depth $dtor $threads)
      done
      for i in "${!names[@]}"; do
        [ $depth = 1 ] && base[$threads.$dtor.$i]=${ns[$i]}
        per_frame=$(awk -v t="${ns[$i]}" -v b="${base[$threads.$dtor.$i]}" -v d=$depth \
          'BEGIN { if (d > 1) printf "%.0f", (t - b) / (d - 1); else printf "-" }')
        ratio=$(awk -v t="${ns[$i]}" -v g="${ns[0]}" 'BEGIN { printf "%.2f", t / g }')
        echo "| $threads | $depth | $([ $dtor = 1 ] && echo yes || echo no) | ${names[$i]} |" \
          "$(printf '%.0f' "${ns[$i]}") | $per_frame | $ratio |" >> "$tmp/table"
      done
    done
  done
done
# Instructions (callgrind, one thread): the difference between 300 and 100 timed throws, per
# throw, so that start-up and warm-up cancel out. Independent of the machine's load.
if command -v valgrind > /dev/null; then
  ir() { # total instructions of a run
    LD_PRELOAD="$1" valgrind --tool=callgrind --callgrind-out-file=/dev/null "${@:2}" 2>&1 \
      > /dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
  }
  {
    echo
    echo "Instructions per throw-and-catch (callgrind: the whole process's, over 300 throws less"
    echo "over 100, per throw; one thread), and per frame above depth 1's:"
    echo
    echo "| depth | destructors | unwinder | instructions per throw | per frame | × libgcc_s |"
    echo "|---:|---|---|---:|---:|---:|"
  } >> "$tmp/table"
  declare -A ibase
  for dtor in 0 1; do
    for depth in 1 10 100; do
      declare -A per=()
      for i in "${!names[@]}"; do
        a=$(ir "${preloads[$i]}" "$tmp/throw_bench" $depth $dtor 1 100 1)
        b=$(ir "${preloads[$i]}" "$tmp/throw_bench" $depth $dtor 1 300 1)
        per[$i]=$(( (b - a) / 200 ))
      done
      for i in "${!names[@]}"; do
        [ $depth = 1 ] && ibase[$dtor.$i]=${per[$i]}
        per_frame=$(awk -v t="${per[$i]}" -v b="${ibase[$dtor.$i]}" -v d=$depth \
          'BEGIN { if (d > 1) printf "%.0f", (t - b) / (d - 1); else printf "-" }')
        ratio=$(awk -v t="${per[$i]}" -v g="${per[0]}" 'BEGIN { printf "%.2f", t / g }')
        echo "| $depth | $([ $dtor = 1 ] && echo yes || echo no) | ${names[$i]} | ${per[$i]} |" \
          "$per_frame | $ratio |" >> "$tmp/table"
      done
    done
  done
else
  echo "(valgrind not installed: no instruction counts)" >> "$tmp/table"
fi
# The __register_frame family (JIT code): a register + deregister pair, and a throw through one
# registered JIT frame, with 0, 100 and 1,000 other objects registered.
g++ -O2 bench/eh/register_bench.cpp -o "$tmp/register_bench"
{
  echo
  echo "Frames registered at run time (\`bench/eh/register_bench.cpp\`: one-FDE objects registered by"
  echo "their FDE's address, the form all three take): nanoseconds per \`__register_frame\` +"
  echo "\`__deregister_frame\` pair, and per throw-and-catch through one registered JIT frame, with"
  echo "LIVE other objects registered; the median of 7 rounds:"
  echo
  echo "| operation | live objects | unwinder | ns | × libgcc_s |"
  echo "|---|---:|---|---:|---:|"
} >> "$tmp/table"
for op in register throw; do
  for live in 0 100 1000; do
    declare -A rns=()
    for i in "${!names[@]}"; do
      rns[$i]=$(LD_PRELOAD="${preloads[$i]}" "$tmp/register_bench" $op $live 2> /dev/null || echo "failed")
      # An unwinder without the family (nongnu libunwind has its own _U_dyn_register): the
      # program's calls bind to libgcc_s's, and its throws cannot find the JIT frame.
      if [ -n "${preloads[$i]}" ] && ! nm -D --defined-only "${preloads[$i]}" | grep -qE ' __register_frame(@|$)'; then
        [ "$op" = register ] && rns[$i]="${rns[$i]} (libgcc_s's: not exported)"
        [ "$op" = throw ] && rns[$i]="${rns[$i]} (no __register_frame)"
      fi
    done
    for i in "${!names[@]}"; do
      ratio=$(awk -v t="${rns[$i]}" -v g="${rns[0]}" 'BEGIN { if (t + 0 > 0 && t !~ /[(]/) printf "%.2f", t / g; else print "-" }')
      echo "| $op | $live | ${names[$i]} | ${rns[$i]} | $ratio |" >> "$tmp/table"
    done
  done
done
mkdir -p bench/results
cp "$tmp/table" "$out"
cat "$out"
