// ThreadPages<Contents>: a thread's own `Contents` for local walks (caches), in pages of their own
// (mmap, async-signal-safe: a thread's first walk may be in a signal handler, where malloc is not
// allowed), mapped on the thread's first claim and unmapped when it exits (ThreadExitKey).
//
// A walk claims them for its duration: a signal handler that interrupted a walk of the same thread
// finds them busy and goes without. They are emptied (Contents::clear) when they describe another
// LocalSpace than the claimer's (the space was rebuilt), or a late library was withdrawn since
// (dlclose: their entries may describe unloaded code).
#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>
#include <new>
#include <sys/mman.h>

#include "capi/address_space.hpp"
#include "capi/thread_exit_key.hpp"
#include "runtime/registered_frames.hpp"

namespace ehelf::capi {

template <class Contents> class ThreadPages {
public:
  // Once, outside signal handlers: the thread-exit hook.
  static void create_key() { key_.create(unmap); }

  // The calling thread's contents for one walk; get() is null when there are none (mmap failed)
  // or they are busy.
  class Claimed {
  public:
    explicit Claimed(const LocalSpace& s) : block_(claim(s)) {}
    ~Claimed() {
      if (!block_) return;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      block_->busy = 0;
    }
    Claimed(const Claimed&) = delete;
    Claimed& operator=(const Claimed&) = delete;
    Contents* get() const { return block_ ? &block_->contents : nullptr; }

  private:
    typename ThreadPages::Block* block_;
  };

private:
  struct Block {
    volatile sig_atomic_t busy = 0; // a walk is using them
    const LocalSpace* space = nullptr;
    // The generations of space->late and of the registered frames when they were last emptied.
    uint64_t late_generation = 0;
    Contents contents;
  };

  static Block* claim(const LocalSpace& s) {
    Block* b = current_;
    if (!b) {
      void* p = ::mmap(nullptr, sizeof(Block), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
      if (p == MAP_FAILED) return nullptr;
      b = new (p) Block;
      key_.set(b);
      current_ = b;
    }
    if (b->busy) return nullptr;
    b->busy = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // Both only grow: their sum changes whenever either does.
    const uint64_t generation =
        s.late.generation() + g_registered_frames_generation.load(std::memory_order_acquire);
    if (b->space != &s || b->late_generation != generation) {
      b->contents.clear();
      b->space = &s;
      b->late_generation = generation;
    }
    return b;
  }

  static void unmap(void* block) {
    current_ = nullptr; // a later walk on this thread (another key's destructor) maps anew
    std::atomic_signal_fence(std::memory_order_seq_cst);
    ::munmap(block, sizeof(Block));
  }

  // One pointer of static TLS: initial-exec, so that reading it never calls __tls_get_addr,
  // which may allocate the first time a thread touches a dlopened library's TLS.
  static inline thread_local Block* current_ __attribute__((tls_model("initial-exec"))) = nullptr;
  static inline ThreadExitKey key_;
};

} // namespace ehelf::capi
