// record(): a sampling profiler that unwinds as it samples. It runs a command (or watches running
// processes, or the whole system) with the perf events of EventSet, and for each sample unwinds
// the user stack straight out of the ring buffer with the runtime's fast walk (the code ehelf perf
// and the C library use), keeping only the stack's addresses in a Profile; the stack bytes are
// given back to the kernel with the record. Processes are followed through the ring's own
// mmap2/comm/fork/exit records (so threads, children and exec'd programs are named right), plus
// /proc/PID/maps and the threads' names for processes that were already running.
//
// It stops when the command exits (its exit status is returned), when `stop` becomes true (the
// CLI sets it on SIGINT/SIGTERM; a command still running is then sent SIGTERM, as perf record
// does), after `duration` seconds (likewise), or when every watched process has exited.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "perf/sample_unwinder.hpp"
#include "record/event_set.hpp"
#include "record/profile.hpp"
#include "support/result.hpp"

namespace ehelf::record {

struct RecordOptions {
  SamplingOptions sampling;
  std::vector<std::string> command; // run this (argv), or:
  std::vector<int> pids;            // watch these running processes, or:
  bool system_wide = false;         // every process (-a)
  double duration = 0;              // seconds; 0: until the command or processes end
  BackendKind backend = BackendKind::Auto;
  size_t max_depth = 512;
  std::vector<std::string> debug_dirs; // SampleUnwinderOptions::debug_dirs
  bool keep_timeline = false;          // keep each sample's time (Profile::keep_timeline)
};

struct Recording {
  Profile profile;
  std::unique_ptr<perf::SampleUnwinder> unwinder; // names the profile's stacks
  double seconds = 0;                             // wall time sampled
  int exit_status = 0; // the command's (its exit code, or 128 + the signal that ended it)
  bool kernel = true;  // kernel frames were sampled
  std::string note;    // what was given up at the start (EventSet::note), or empty
  uint64_t ring_records = 0;
};

Result<Recording> record(const RecordOptions& options, const std::atomic<bool>* stop);

} // namespace ehelf::record
