// Each thread's cache of what frames' FDEs say (start, LSDA, personality), by pc: a throw
// looks each frame up twice (search and cleanup phases) and every _Unwind_Resume again, where
// finding the FDE (the .eh_frame_hdr search, the CIE's augmentation parsed) costs more than the
// step itself. Direct-mapped, in pages of the thread's own (mmap on its first throw, unmapped
// at its exit): no lock, no malloc; emptied when the runtime's space is rebuilt or a late
// library is withdrawn (dlclose), as the runtime's own thread caches are.
#pragma once

#include <cstdint>

#include "capi/address_space.hpp"

namespace ehelf::eh {

struct ProcEntry {
  uint64_t key = 0; // the lookup (pc * 2 + exact), 0: empty
  uint64_t lsda = 0, func = 0, personality = 0;
  bool has_fde = false;
};

// The calling thread's cache, claimed for one lookup and its fill: a signal handler that throws
// while the thread is between the two finds it busy and goes without (as the runtime's own
// thread caches). entry() is null when the thread has none (mmap failed) or it is busy.
class ClaimedProcCache {
public:
  explicit ClaimedProcCache(const capi::LocalSpace& space);
  ~ClaimedProcCache();
  ClaimedProcCache(const ClaimedProcCache&) = delete;
  ClaimedProcCache& operator=(const ClaimedProcCache&) = delete;
  // The entry for the frame at `pc` (`exact`: not a return address); one whose key differs is
  // to be filled.
  ProcEntry* entry(uint64_t pc, bool exact) const;

private:
  struct ProcCache* cache_ = nullptr;
};

// Once at load: the thread-exit hook.
void create_proc_cache_key();

} // namespace ehelf::eh
