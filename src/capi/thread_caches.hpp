// A thread's own caches for local walks: the rule cache of unw_backtrace's fast walk and the
// rows remembered for cursor steps (unw_step). They live in pages of their own (mmap, which is
// async-signal-safe: a thread's first walk may be in a signal handler, where malloc is not
// allowed), mapped on the thread's first claim and unmapped when the thread exits.
#pragma once

#include <csignal>

#include "runtime/row_cache.hpp"
#include "runtime/rule_cache.hpp"

namespace ehelf::capi {

struct LocalSpace;

struct ThreadCaches {
  const LocalSpace* space = nullptr; // the space whose modules the caches describe
  uint64_t late_generation = 0;      // and space->late's generation then (a withdrawn library)
  // A walk is using the caches: a signal handler that interrupted it must not change them.
  volatile sig_atomic_t busy = 0;
  RuleCache rules; // unw_backtrace
  RowCache rows;   // cursor steps
};

// The calling thread's caches, marked busy and holding entries of `s` only (after a rebuild of
// the space, or a late library's withdrawal, the old entries may describe unloaded code); null when
// there are none (mmap failed) or they are busy, i.e. this call interrupted a walk of this thread.
ThreadCaches* claim_thread_caches(const LocalSpace& s);
void release_thread_caches(ThreadCaches& caches);

// claim_thread_caches for a scope: released when it ends, also by an exception.
class ClaimedCaches {
public:
  explicit ClaimedCaches(const LocalSpace& s) : caches_(claim_thread_caches(s)) {}
  ~ClaimedCaches() {
    if (caches_) release_thread_caches(*caches_);
  }
  ClaimedCaches(const ClaimedCaches&) = delete;
  ClaimedCaches& operator=(const ClaimedCaches&) = delete;
  ThreadCaches* get() const { return caches_; }

private:
  ThreadCaches* caches_;
};

// Once, while the first LocalSpace is built (under its lock, outside signal handlers): the
// thread-exit hook that unmaps a thread's caches.
void create_thread_caches_key();

} // namespace ehelf::capi
