#include "eh/proc_cache.hpp"

#include <atomic>
#include <csignal>
#include <new>
#include <sys/mman.h>

#include "capi/thread_exit_key.hpp"

namespace ehelf::eh {

namespace {

constexpr unsigned kEntries = 1024;

} // namespace

struct ProcCache {
  volatile sig_atomic_t busy = 0; // a lookup and its fill are under way
  const capi::LocalSpace* space = nullptr;
  uint64_t late_generation = 0;
  ProcEntry entries[kEntries];
};

namespace {

// initial-exec: reading it never calls __tls_get_addr (which may allocate).
thread_local ProcCache* t_cache __attribute__((tls_model("initial-exec"))) = nullptr;
capi::ThreadExitKey g_key;

void unmap_cache(void* cache) {
  t_cache = nullptr; // a later throw on this thread (another key's destructor) maps anew
  ::munmap(cache, sizeof(ProcCache));
}

ProcCache* thread_cache() {
  if (t_cache) return t_cache;
  void* p = ::mmap(nullptr, sizeof(ProcCache), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* cache = new (p) ProcCache;
  g_key.set(cache);
  t_cache = cache;
  return cache;
}

} // namespace

void create_proc_cache_key() {
  g_key.create(unmap_cache);
}

ClaimedProcCache::ClaimedProcCache(const capi::LocalSpace& space) {
  ProcCache* cache = thread_cache();
  if (!cache || cache->busy) return;
  cache->busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const uint64_t generation = space.late.generation();
  if (cache->space != &space || cache->late_generation != generation) {
    for (ProcEntry& e : cache->entries)
      e.key = 0;
    cache->space = &space;
    cache->late_generation = generation;
  }
  cache_ = cache;
}

ClaimedProcCache::~ClaimedProcCache() {
  if (!cache_) return;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  cache_->busy = 0;
}

ProcEntry* ClaimedProcCache::entry(uint64_t pc, bool exact) const {
  if (!cache_) return nullptr;
  const uint64_t key = pc * 2 + (exact ? 1 : 0);
  // Return addresses are spread over code; the low bits above the alignment pick the slot.
  return &cache_->entries[(key >> 1 ^ key >> 11) % kEntries];
}

} // namespace ehelf::eh
