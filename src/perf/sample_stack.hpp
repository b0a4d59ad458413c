// SampleStack: one perf sample turned into a call stack, what the output writers (folded,
// flame graph, script, JSON) consume.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ehelf::perf {

// An executable mapping of a file in a process, what a frame's address is in: as /proc/PID/maps
// and perf's MMAP2 records give it, with the file's build id (what pprof's Mapping says).
struct FileMapping {
  std::string path;
  uint64_t start = 0, end = 0; // the addresses mapped, [start, end)
  uint64_t offset = 0;         // the file offset mapped at start
  std::string build_id;        // hex of the file's NT_GNU_BUILD_ID note, or empty if unknown
  auto operator<=>(const FileMapping&) const = default;
};

struct StackFrame {
  uint64_t pc = 0;    // actual address (the first frame's interrupted pc, then return addresses)
  std::string symbol; // "" when unknown
  uint64_t symbol_offset = 0; // pc - symbol start, when symbol is known
  std::string module;         // file path, "[vdso]", "[kernel.kallsyms]", or "" when unknown
  // The address perf script prints: for user frames the looked-up address (the pc, or a return
  // address - 1: the call) as an offset in its mapped file, for kernel frames the pc itself.
  // symbol and symbol_offset are those of the looked-up address too.
  uint64_t dso_address = 0;
  // The user frame's mapping (kept by the SampleUnwinder that named the frame); null for kernel
  // frames and addresses in no mapping.
  const FileMapping* mapping = nullptr;
};

struct SampleStack {
  std::string comm; // the thread's command name at the sample's time
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;              // perf clock, nanoseconds
  uint64_t period = 1;            // the sample's weight (PERF_SAMPLE_PERIOD, else 1)
  std::vector<StackFrame> frames; // innermost first
  std::string stop;               // why the walk ended ("end of stack", ...)
  // No call chain was recorded (perf record without -g or --call-graph): the one frame is the
  // sampled ip, which perf script prints on the sample's own line.
  bool ip_only = false;
};

} // namespace ehelf::perf

namespace ehelf::perf {

// A distinct call stack of a profile and how much fell on it: what the profile writers (pprof,
// the summary) consume when samples were aggregated as they came (ehelf record).
struct CountedStack {
  SampleStack stack; // comm, pid, tid and frames; time and period are the first sample's
  uint64_t samples = 0;
  uint64_t period = 0; // the samples' summed periods (event counts: nanoseconds for cpu-clock)
};

} // namespace ehelf::perf
