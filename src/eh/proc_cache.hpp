// Each thread's cache of what frames' FDEs say (start, LSDA, personality), by pc: a throw
// looks each frame up twice (search and cleanup phases) and every _Unwind_Resume again, where
// finding the FDE (the .eh_frame_hdr search, the CIE's augmentation parsed) costs more than the
// step itself. Direct-mapped, in capi::ThreadPages (pages of the thread's own, no lock, no
// malloc, emptied when the runtime's space is rebuilt or a late library is withdrawn), as the
// runtime's own thread caches.
#pragma once

#include <cstdint>

#include "capi/thread_pages.hpp"

namespace ehelf::eh {

struct ProcEntry {
  uint64_t key = 0; // the lookup (pc * 2 + exact), 0: empty
  uint64_t lsda = 0, func = 0, personality = 0;
};

struct ProcCache {
  static constexpr unsigned kEntries = 1024;
  ProcEntry entries[kEntries];
  void clear() {
    for (ProcEntry& e : entries)
      e.key = 0;
  }
  // The entry for the frame at `pc` (`exact`: not a return address); one whose key differs is
  // to be filled.
  ProcEntry& entry(uint64_t pc, bool exact) {
    const uint64_t key = pc * 2 + (exact ? 1 : 0);
    // Return addresses are spread over code; the low bits above the alignment pick the slot.
    return entries[(key >> 1 ^ key >> 11) % kEntries];
  }
};

// The calling thread's cache, claimed for one lookup and its fill: a signal handler that throws
// while the thread is between the two finds it busy and goes without; get() is null then, and
// when the thread has none (mmap failed).
using ClaimedProcCache = capi::ThreadPages<ProcCache>::Claimed;

// Once at load: the thread-exit hook.
inline void create_proc_cache_key() {
  capi::ThreadPages<ProcCache>::create_key();
}

} // namespace ehelf::eh
