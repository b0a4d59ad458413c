// What the library did, for proving that it was the unwinder used: with EHELF_EH_STATS set in
// the environment, the counts are printed to stderr when the process exits ("ehelf-eh: ...").
// Counted only then (read once at load), so that a throw touches no shared cache line.
#pragma once

#include <atomic>
#include <cstdint>

namespace ehelf::eh {

struct Counters {
  std::atomic<uint64_t> raises{0};     // _Unwind_RaiseException
  std::atomic<uint64_t> resumes{0};    // _Unwind_Resume
  std::atomic<uint64_t> forced{0};     // _Unwind_ForcedUnwind
  std::atomic<uint64_t> backtraces{0}; // _Unwind_Backtrace
  std::atomic<uint64_t> landings{0};   // contexts installed (a landing pad or handler entered)
  std::atomic<uint64_t> foreign{0};    // libgcc's contexts handed to our accessors
  std::atomic<uint64_t> handed{0};     // raises and resumes handed to libgcc (its frames met)
};

extern bool g_counting;
extern Counters g_counters;

inline void count(std::atomic<uint64_t>& c) {
  if (g_counting) c.fetch_add(1, std::memory_order_relaxed);
}

} // namespace ehelf::eh
