// SampleUnwinder: turns the records of a perf.data file into call stacks. It follows the
// recorded processes (mmap, comm, fork, exit, in time order) to know each process's modules
// and thread names, and unwinds each sample's user stack from its register set and stack copy
// with the runtime's fast walk over the copy (Unwinder::backtrace_direct through a LocalMemory
// delta), kernel frames coming from the sample's callchain.
//
// Module files are the ones on this machine at the recorded paths, used only when their build id
// matches the one perf recorded (else perf's build-id cache, ~/.debug/.build-id, is tried); the
// vDSO is this process's when its build id matches. A frame in a module without a usable file
// ends the walk with a reason, as perf does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "perf/kernel_symbols.hpp"
#include "perf/perf_data.hpp"
#include "perf/sample_stack.hpp"
#include "runtime/symbolize.hpp"
#include "runtime/unwinder.hpp"

namespace ehelf::perf {

struct SampleUnwinderOptions {
  BackendKind backend = BackendKind::Auto;
  size_t max_depth = 512;
  bool kernel = true;      // kernel frames (from the callchain) above the user frames
  bool symbols = true;     // name frames
  bool demangle = true;    // C++ names demangled without parameters, as perf prints them
  std::string buildid_dir; // perf's build-id cache; empty: $PERF_BUILDID_DIR, else ~/.debug
};

// Counts for a summary line.
struct UnwindStats {
  uint64_t samples = 0;
  uint64_t user_samples = 0; // with a user register set and stack
  uint64_t frames = 0;
  uint64_t stopped_early = 0;   // walks that ended for another reason than the end of the stack
  uint64_t modules_missing = 0; // mapped files without a usable copy here
};

class SampleUnwinder {
public:
  SampleUnwinder(const PerfData& data, SampleUnwinderOptions options = {});
  ~SampleUnwinder();

  // Feeds one record (in time order: see time_ordered()); returns true and fills `out` for a
  // sample.
  bool feed(const Record& r, SampleStack& out);
  const UnwindStats& stats() const { return stats_; }
  // Steps that ran the interpreter, by why (Unwinder::slow_steps), over every process.
  SlowSteps slow_steps() const;

  // Records sorted by time (stable: records without a time keep their place relative to the
  // others), as perf orders them before processing.
  static std::vector<const Record*> time_ordered(const std::vector<Record>& records);

private:
  struct Process;
  struct LoadedFile;
  Process& process(uint32_t pid);
  // A kernel frame at `pc`, named from the kernel's symbols (read on first use).
  StackFrame kernel_frame(uint64_t pc);
  void on_mmap(const MmapRecord& m);
  void on_comm(const CommRecord& c);
  void on_fork(const TaskRecord& t);
  void on_exit(const TaskRecord& t);
  void unwind_sample(const Record& r, const SampleRecord& s, SampleStack& out);
  void add_user_frames(Process& p, const SampleRecord& s, SampleStack& out);
  // Rebuilds the process's module map (and drops its rule cache) after mappings changed.
  void refresh(Process& p);
  std::shared_ptr<const ModuleData> data_for(const MmapRecord& m, std::string& path_used,
                                             uint64_t& bias);
  void name_frame(Process& p, StackFrame& f, bool return_address);

  const PerfData& data_;
  SampleUnwinderOptions options_;
  std::map<uint32_t, std::unique_ptr<Process>> processes_;
  std::map<uint32_t, std::string> comms_;                          // by tid
  std::map<std::string, std::vector<uint8_t>> recorded_build_ids_; // by file name
  std::map<std::string, std::unique_ptr<LoadedFile>> files_;       // by path + build id
  Symbolizer symbolizer_;
  KernelSymbols kernel_symbols_;
  bool kernel_symbols_loaded_ = false;
  UnwindStats stats_;
};

} // namespace ehelf::perf
