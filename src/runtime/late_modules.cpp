#include "runtime/late_modules.hpp"

#include "runtime/memory.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <elf.h>
#include <link.h>
#include <sys/uio.h>
#include <unistd.h>

namespace ehelf {
namespace {

uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); // the vDSO: no system call
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// The loaded image of one link_map entry: its executable segment holding `pc`, and where its
// search table is. False if `pc` is not in it or its headers cannot be read.
bool module_holding(uint64_t base, uint64_t pc, Module& m) {
  Elf64_Ehdr eh;
  // A shared object's ELF header is at its load address (first PT_LOAD at vaddr 0, offset 0);
  // a prelinked one elsewhere is not found (its pcs end walks).
  if (!read_own_memory(base, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phnum == 0 || eh.e_phnum > 64)
    return false;
  Elf64_Phdr ph[64];
  if (!read_own_memory(base + eh.e_phoff, ph, eh.e_phnum * sizeof(Elf64_Phdr))) return false;
  bool holds = false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    const Elf64_Phdr& p = ph[i];
    if (p.p_type == PT_LOAD && (p.p_flags & PF_X) && pc - (base + p.p_vaddr) < p.p_memsz) {
      m.start = base + p.p_vaddr;
      m.end = m.start + p.p_memsz;
      holds = true;
    }
  }
  if (!holds) return false;
  m.bias = base;
  m.cfi_hdr = m.cfi_hdr_size = m.cfi_segment_end = 0;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    if (ph[i].p_type != PT_GNU_EH_FRAME) continue;
    for (unsigned j = 0; j < eh.e_phnum; ++j) {
      const Elf64_Phdr& l = ph[j];
      if (l.p_type == PT_LOAD && ph[i].p_vaddr >= l.p_vaddr &&
          ph[i].p_vaddr + ph[i].p_memsz <= l.p_vaddr + l.p_filesz) {
        m.cfi_hdr = base + ph[i].p_vaddr;
        m.cfi_hdr_size = ph[i].p_memsz;
        m.cfi_segment_end = base + l.p_vaddr + l.p_filesz;
      }
    }
  }
  return true;
}

// A fingerprint of the loaded image at `base`: FNV-1a of its first bytes, up to 1 KiB within
// its first page (the ELF and program headers and, in linkers' usual layout, the notes with the
// build id). False when they cannot be read (unmapped).
bool fingerprint_of(uint64_t base, uint64_t& hash) {
  uint8_t bytes[1024];
  const uint64_t n = std::min<uint64_t>(sizeof bytes, 4096 - (base & 4095));
  if (!read_own_memory(base, bytes, n)) return false;
  hash = 0xcbf29ce484222325u;
  for (uint64_t i = 0; i < n; ++i)
    hash = (hash ^ bytes[i]) * 0x100000001b3u;
  return true;
}

} // namespace

LateModules::LateModules() : slots_(new Slot[kSlots]) {
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& s = slots_[i];
    s.module.path.reserve(kMaxPath); // names are assigned within this capacity: no allocation
    auto data = std::make_shared<ModuleData>();
    s.data = data.get();
    s.module.data = std::move(data);
  }
}

const Module* LateModules::find(uint64_t pc) const {
  const size_t i = slot_holding(pc);
  return i < kSlots ? &slots_[i].module : discover(pc);
}

size_t LateModules::slot_holding(uint64_t pc) const {
  const size_t n = std::min(claimed_.load(std::memory_order_acquire), kSlots);
  for (size_t i = 0; i < n; ++i)
    if (published_[i].load(std::memory_order_acquire)) {
      const Module& m = slots_[i].module;
      if (pc - m.start < m.end - m.start) return i;
    }
  return kSlots;
}

bool LateModules::check_slot(size_t i) const {
  uint64_t now = 0;
  if (fingerprint_of(slots_[i].image, now) && now == slots_[i].fingerprint) return true;
  // Withdrawn once (concurrent checks of one slot both find it changed).
  if (!published_[i].exchange(false, std::memory_order_acq_rel)) return false;
  withdrawal_order_[i].store(withdrawals_.fetch_add(1, std::memory_order_relaxed),
                             std::memory_order_relaxed);
  withdrawn_[i].store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  last_discovery_ns_.store(0, std::memory_order_relaxed); // what is there now: found at once
  return false;
}

bool LateModules::check_slot_at(uint64_t pc) const {
  const size_t i = slot_holding(pc);
  return i == kSlots || check_slot(i);
}

bool LateModules::check_slots_at(const uint64_t* pcs, size_t n) const {
  if (claimed_.load(std::memory_order_acquire) == 0) return true; // none found: nothing to check
  bool checked[kSlots] = {};
  bool all_current = true;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = slot_holding(pcs[k]);
    if (i == kSlots || checked[i]) continue;
    checked[i] = true;
    all_current = check_slot(i) && all_current;
  }
  return all_current;
}

size_t LateModules::claim_slot() const {
  if (claimed_.load(std::memory_order_relaxed) < kSlots) {
    const size_t i = claimed_.fetch_add(1, std::memory_order_relaxed);
    if (i < kSlots) return i;
  }
  if (reuses_.load(std::memory_order_relaxed) >= kMaxReuses) return kSlots;
  for (;;) {
    size_t oldest = kSlots;
    for (size_t i = 0; i < kSlots; ++i)
      if (withdrawn_[i].load(std::memory_order_acquire) &&
          (oldest == kSlots || withdrawal_order_[i].load(std::memory_order_relaxed) <
                                   withdrawal_order_[oldest].load(std::memory_order_relaxed)))
        oldest = i;
    if (oldest == kSlots) return kSlots;
    bool was = true;
    if (withdrawn_[oldest].compare_exchange_strong(was, false, std::memory_order_acq_rel)) {
      reuses_.fetch_add(1, std::memory_order_relaxed);
      return oldest;
    }
  }
}

const Module* LateModules::discover(uint64_t pc) const {
  const uint64_t now = now_ns();
  uint64_t last = last_discovery_ns_.load(std::memory_order_relaxed);
  if (now - last < kMinIntervalNs ||
      !last_discovery_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed))
    return nullptr;
  r_debug dbg;
  if (!read_own_memory(reinterpret_cast<uint64_t>(&_r_debug), &dbg, sizeof dbg) ||
      dbg.r_state != r_debug::RT_CONSISTENT)
    return nullptr; // being changed: the next walk looks again
  uint64_t at = reinterpret_cast<uint64_t>(dbg.r_map);
  for (unsigned steps = 0; at && steps < 4096; ++steps) {
    link_map lm;
    if (!read_own_memory(at, &lm, sizeof lm)) return nullptr;
    at = reinterpret_cast<uint64_t>(lm.l_next);
    Module found;
    uint64_t fingerprint = 0;
    if (!module_holding(lm.l_addr, pc, found) || !fingerprint_of(lm.l_addr, fingerprint)) continue;
    const size_t i = claim_slot();
    if (i >= kSlots) return nullptr;
    Slot& s = slots_[i];
    s.data->forget_loaded_rows();
    s.module.start = found.start;
    s.module.end = found.end;
    s.module.bias = found.bias;
    s.module.cfi_hdr = found.cfi_hdr;
    s.module.cfi_hdr_size = found.cfi_hdr_size;
    s.module.cfi_segment_end = found.cfi_segment_end;
    s.image = lm.l_addr;
    s.fingerprint = fingerprint;
    char name[kMaxPath];
    size_t len = 0;
    // The name, a byte at a time up to its end (a page boundary may follow it closely).
    for (uint64_t p = reinterpret_cast<uint64_t>(lm.l_name); p && len + 1 < kMaxPath; ++len)
      if (!read_own_memory(p + len, &name[len], 1) || name[len] == '\0') break;
    s.module.path.assign(name, len);
    find_rows_in_memory(s.module, *s.data);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    published_[i].store(true, std::memory_order_release);
    return &s.module;
  }
  return nullptr;
}

} // namespace ehelf
