// record(): a sampling profiler that unwinds as it samples. It runs a command (or watches running
// processes or some of their threads, or the whole system) with the perf events of EventSet, and
// for each sample unwinds the user stack straight out of the ring buffer with the runtime's fast
// walk (the code ehelf perf and the C library use), keeping only the stack's addresses in a
// Profile; the stack bytes are given back to the kernel with the record. Processes are followed
// through the ring's own mmap2/comm/fork/exit records (so threads, children and exec'd programs are
// named right), plus /proc/PID/maps and the threads' names for processes that were already running.
//
// It stops when the command exits (its exit status is returned), at the first stop request
// (`stop_requests` above 0: the CLI counts SIGINT/SIGTERM; a command still running is then sent
// SIGTERM, as perf record does, and SIGKILL at the next request if it has not ended), after
// `duration` seconds (likewise), or when every watched process has exited. Whatever ends it, even
// an error, the command is not left behind: killed and reaped if it has not ended.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bpf/kernel_walk.hpp"
#include "perf/sample_unwinder.hpp"
#include "record/event_set.hpp"
#include "record/profile.hpp"
#include "support/result.hpp"

namespace ehelf::record {

// Where user stacks are walked: in the kernel, by a BPF program over ehelf's rows (no stack
// bytes leave it), or here, from a copy of each sample's stack; Auto: in the kernel where this
// process may load BPF (root, or CAP_BPF and CAP_PERFMON), else here.
enum class UnwindMode { Auto, Kernel, User };

// Kernel mode's own check (copy mode): the samples handed to perf with their stack copies too,
// walked here as well, compared with the kernel's walks of them frame for frame.
struct CopyComparison {
  uint64_t compared = 0, identical = 0;
  uint64_t not_loaded = 0;      // the kernel's walk stopped: process or table not loaded yet
  uint64_t not_expressible = 0; // the kernel's walk stopped at a row BPF cannot express
  // Outside the copy: the user-space walk stopped for bytes perf did not copy where the kernel,
  // reading the live stack, went on; every frame the user-space walk gave is the kernel's too.
  // Past the copy's end (--stack-size: a read refused), or below rsp, where the copy starts: an
  // epilogue's rows still read a register from the slot it was just popped from (glibc's
  // _dl_fixup after `pop %rbx`, under ld.so's lazy-binding trampoline, whose CFA is rbx-based:
  // without rbx the walk cannot go on). Both walks start from the same registers and follow the
  // same rules, so the kernel can know more only from memory the copy lacks. Also the reverse:
  // a sample parked in the kernel is walked again from the 16 KiB of its stack kept there, and
  // a walk that goes further than that stops where perf's larger copy went on.
  uint64_t outside_copy = 0;
  // In a parent's address space: a vfork child (sh runs every command so) runs on its parent's
  // stack until its exec replaces the address space, and the exec lets the parent run a little
  // before it does: a child sampled then has its stack written by the parent between the
  // kernel's reads and perf's copy of one sample (seen: the parent's sigprocmask frames in
  // perf's copy of the child's execve, the child's own in the kernel's walk).
  uint64_t parents_space = 0;
  uint64_t other = 0;                // any other difference
  uint64_t unmatched = 0;            // a stack copy whose kernel walk was not found (lost)
  std::vector<std::string> examples; // the first few differences of `other`, described
};

struct RecordOptions {
  SamplingOptions sampling;
  std::vector<std::string> command; // run this (argv), or:
  std::vector<int> pids;            // watch these running processes, or:
  std::vector<int> tids;            // these threads of running processes, or:
  bool system_wide = false;         // every process (-a)
  double duration = 0;              // seconds; 0: until the command or processes end
  BackendKind backend = BackendKind::Auto;
  size_t max_depth = 512;
  std::vector<std::string> debug_dirs; // SampleUnwinderOptions::debug_dirs
  bool demangle = true;                // SampleUnwinderOptions::demangle (false: -r)
  bool keep_timeline = false;          // keep each sample's time (Profile::keep_timeline)
  UnwindMode unwind = UnwindMode::Auto;
  // Every `interval` seconds (0: never), the profile so far is handed to `on_interval` (with the
  // interval's number, from 1) and a new one begins: how a profiler runs for days on a fleet.
  // The last, partial interval is left in the Recording as usual.
  double interval = 0;
  std::function<Status(struct Recording&, unsigned index)> on_interval;
  uint32_t kernel_copy_every = 0;    // kernel mode: also copy every Nth sample's stack (copy mode)
  bool kernel_find_mappings = false; // kernel mode: KernelWalkOptions::find_mappings_only
  bool kernel_park = true;           // kernel mode: KernelWalkOptions::park
  // Told at once what was given up to start (EventSet::note: kernel frames, ring size, the rate).
  std::function<void(const std::string&)> on_note;
};

struct Recording {
  Profile profile;
  std::unique_ptr<perf::SampleUnwinder> unwinder; // names the profile's stacks
  double seconds = 0;                             // wall time sampled
  int exit_status = 0;    // the command's (its exit code, or 128 + the signal that ended it)
  bool kernel = true;     // kernel frames were sampled
  uint64_t frequency = 0; // samples per second asked of the kernel (0: a fixed period)
  uint64_t ring_records = 0;
  bool in_kernel = false; // user stacks were walked in the kernel
  bpf::KernelWalkStats kernel_walk;
  // -a, -p, -t in kernel mode: the processes whose tables were loaded before sampling began,
  // and how long that took.
  uint64_t kernel_start_processes = 0;
  double kernel_start_seconds = 0;
  CopyComparison copies;   // copy mode's check
  uint64_t ring_bytes = 0; // what the kernel handed over through the perf rings
};

Result<Recording> record(const RecordOptions& options, const std::atomic<int>* stop_requests);

// The summary's lines on the in-kernel walk: its walks by why they ended, the rows it had, what
// left the kernel, and copy mode's comparison.
std::string kernel_walk_summary(const Recording& rec);
// The summary's line for a user-mode recording: the bytes the kernel handed over (each sample's
// registers and stack copy, the side band), in all and per sample.
std::string user_walk_summary(const Recording& rec);

} // namespace ehelf::record
