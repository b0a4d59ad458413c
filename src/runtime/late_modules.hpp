// LateModules: this process's modules loaded after its ModuleMap was made (dlopen), found when a
// walk first meets one of their pcs, from any context, a signal handler's included.
//
// Finding one walks the dynamic loader's list (_r_debug's link_map chain) and reads each
// module's ELF and program headers with process_vm_readv on ourselves, so a module being
// unmapped by a concurrent dlclose makes a read fail instead of faulting; nothing takes the
// loader's lock (dl_iterate_phdr does). The module then goes into one of a fixed number of slots
// made ahead with their ModuleData, claimed with an atomic counter and published with a release
// store: no allocation, no lock. Once all are taken, slots whose library went away are given to
// new ones (see check_slot_at); while the list is being changed (r_state not RT_CONSISTENT), or
// when every slot holds a library still loaded, a pc in an unknown module ends the walk, until
// the owner rebuilds its map outside signal context (unw_flush_cache).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/module_map.hpp"

namespace ehelf {

class LateModules final : public LateModuleSource {
public:
  static constexpr size_t kSlots = 64;
  static constexpr size_t kMaxPath = 512; // longer names are cut (they only name frames)
  // Discoveries at most this often (a walk ending in JIT code must not walk the loader's list
  // each time).
  static constexpr uint64_t kMinIntervalNs = 1'000'000;
  static constexpr uint64_t kMaxReuses = 4096;

  LateModules();
  const Module* find(uint64_t pc) const override;

  // A library found here may be unloaded (dlclose) and another loaded at its address; its slot
  // would then give the old library's rows. Each slot keeps a fingerprint of its image's first
  // bytes (ELF and program headers, notes: the build id): these check it again, with
  // process_vm_readv, before a walk trusts the slot (or after a walk, which is then made
  // again), and withdraw a slot whose image changed or went away: the next find() discovers
  // what is there now, at once, in a slot of its own. Once every slot has been claimed, withdrawn
  // ones are given to new libraries, the longest withdrawn first, each with a new copy of its
  // rows (the old copy stays mapped). A walk that found the slot before its withdrawal and still
  // reads it then may read the new library's bounds: every read of this process's memory goes
  // through process_vm_readv or a copy, so it can give wrong frames (a walk in a library being
  // unloaded, which the check after it makes again), never a fault. At most kMaxReuses
  // reuses (each keeps its old copy's mapping), then as before: walks end in new libraries
  // until the map is rebuilt.
  //
  // False if the published slot holding `pc` (if any) no longer holds its library.
  bool check_slot_at(uint64_t pc) const;
  // No library found yet (nothing to check): what a walk's every frame asks first.
  bool none_found() const { return claimed_.load(std::memory_order_acquire) == 0; }
  // False if a published slot holding one of `pcs` no longer holds its library (each slot read
  // once).
  bool check_slots_at(const uint64_t* pcs, size_t n) const;
  // Changes whenever a slot is withdrawn: what was derived from slots (a thread's rule cache)
  // is stale when it differs.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

private:
  const Module* discover(uint64_t pc) const;
  // The published slot holding `pc`, or kSlots.
  size_t slot_holding(uint64_t pc) const;
  // Whether slot `i` still holds its library; withdraws it if not.
  bool check_slot(size_t i) const;

  struct Slot {
    Module module;
    ModuleData* data = nullptr; // module.data, writable until published
    uint64_t image = 0;         // the ELF header's address
    uint64_t fingerprint = 0;   // of the image's first bytes (see check_slot_at)
  };
  std::unique_ptr<Slot[]> slots_;
  mutable std::atomic<size_t> claimed_{0};
  // Where the next new library goes: a slot never claimed, or one withdrawn (claimed back by
  // exchanging withdrawn_ from true, so that two discoveries never share one); kSlots: none.
  size_t claim_slot() const;
  mutable std::atomic<bool> published_[kSlots] = {};
  mutable std::atomic<bool> withdrawn_[kSlots] = {};
  mutable std::atomic<uint64_t> withdrawal_order_[kSlots] = {}; // when withdrawn (a counter)
  mutable std::atomic<uint64_t> withdrawals_{0};
  mutable std::atomic<uint64_t> reuses_{0};
  mutable std::atomic<uint64_t> last_discovery_ns_{0};
  mutable std::atomic<uint64_t> generation_{0};
};

} // namespace ehelf
