// LateModules: this process's modules loaded after its ModuleMap was made (dlopen), found when a
// walk first meets one of their pcs, from any context, a signal handler's included.
//
// Finding one walks the dynamic loader's list (_r_debug's link_map chain) and reads each
// module's ELF and program headers with process_vm_readv on ourselves, so a module being
// unmapped by a concurrent dlclose makes a read fail instead of faulting; nothing takes the
// loader's lock (dl_iterate_phdr does). The module then goes into one of a fixed number of slots
// made ahead with their ModuleData, claimed with an atomic counter and published with a release
// store: no allocation, no lock. Slots are never reused; when all are taken, or while the list
// is being changed (r_state not RT_CONSISTENT), a pc in an unknown module ends the walk, until
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

  LateModules();
  const Module* find(uint64_t pc) const override;

private:
  const Module* discover(uint64_t pc) const;

  struct Slot {
    Module module;
    ModuleData* data = nullptr; // module.data, writable until published
  };
  std::unique_ptr<Slot[]> slots_;
  mutable std::atomic<size_t> claimed_{0};
  mutable std::atomic<bool> published_[kSlots] = {};
  mutable std::atomic<uint64_t> last_discovery_ns_{0};
};

} // namespace ehelf
