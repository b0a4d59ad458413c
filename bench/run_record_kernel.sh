#!/usr/bin/env bash
# ehelf record --unwind kernel against --unwind user, perf record -g and perf record --call-graph
# dwarf on the same workloads in one run: slowdown, bytes out of the kernel per sample, the
# profiler's CPU time, the BPF program's time per sample and per frame, lost samples. Needs root
# (the BPF program). Writes bench/results/record_kernel.{json,md} (record_kernel_quick.* with
# --quick). Arguments go to bench/record/kernel_bench.py (--quick: short workloads; --freqs 999;
# --repeat N). Then the walk against its peer in the kernel, the kernel's own frame-pointer walk
# (bench_fp_walk), on the C fixture built with frame pointers.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source bench/common/prepare.sh
bench_prepare ehelf fixtures bench_fp_walk
# A --quick run has files of its own: it does not replace the full run's tables.
name=record_kernel
for a in "$@"; do [ "$a" = --quick ] && name=record_kernel_quick; done
python3 bench/record/kernel_bench.py --ehelf build/bin/ehelf --fixtures build/tests/fixtures \
  --fixtures-source tests/fixtures --fp-walk build/bin/bench_fp_walk \
  --json "bench/results/$name.json" --md "bench/results/$name.md" "$@"
cat "bench/results/$name.md"
