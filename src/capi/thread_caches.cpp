#include "capi/thread_caches.hpp"

#include <atomic>
#include <new>
#include <pthread.h>
#include <sys/mman.h>

#include "capi/address_space.hpp"
#include "capi/thread_exit_key.hpp"

namespace ehelf::capi {

namespace {

// One pointer of static TLS: initial-exec, so that reading it never calls __tls_get_addr, which
// may allocate the first time a thread touches a dlopened library's TLS.
thread_local ThreadCaches* t_caches __attribute__((tls_model("initial-exec"))) = nullptr;

ThreadExitKey g_caches_key;

void unmap_thread_caches(void* caches) {
  t_caches = nullptr; // a later walk on this thread (another key's destructor) maps anew
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ::munmap(caches, sizeof(ThreadCaches));
}

// The calling thread's caches, mapped on first use; null if mmap failed.
ThreadCaches* thread_caches() {
  if (t_caches) return t_caches;
  void* p = ::mmap(nullptr, sizeof(ThreadCaches), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* caches = new (p) ThreadCaches;
  g_caches_key.set(caches);
  t_caches = caches;
  return caches;
}

} // namespace

void create_thread_caches_key() {
  g_caches_key.create(unmap_thread_caches);
}

ThreadCaches* claim_thread_caches(const LocalSpace& s) {
  ThreadCaches* caches = thread_caches();
  if (!caches || caches->busy) return nullptr;
  caches->busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (caches->space != &s || caches->late_generation != s.late.generation()) {
    caches->rules.clear();
    caches->rows.clear();
    caches->space = &s;
    caches->late_generation = s.late.generation();
  }
  return caches;
}

void release_thread_caches(ThreadCaches& caches) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  caches.busy = 0;
}

} // namespace ehelf::capi
