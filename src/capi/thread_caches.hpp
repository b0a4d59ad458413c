// A thread's own caches for local walks: the rule cache of unw_backtrace's fast walk and the
// rows remembered for cursor steps (unw_step), in ThreadPages (pages of the thread's own, claimed
// by one walk at a time, emptied when they describe another space or a withdrawn library).
#pragma once

#include "capi/thread_pages.hpp"
#include "runtime/row_cache.hpp"
#include "runtime/rule_cache.hpp"

namespace ehelf::capi {

struct ThreadCaches {
  RuleCache rules; // unw_backtrace
  RowCache rows;   // cursor steps
  void clear() {
    rules.clear();
    rows.clear();
  }
};

// The calling thread's caches for a scope (get(): null when it has none or they are busy, i.e.
// this call interrupted a walk of this thread).
using ClaimedCaches = ThreadPages<ThreadCaches>::Claimed;

// Once, while the first LocalSpace is built (under its lock, outside signal handlers): the
// thread-exit hook that unmaps a thread's caches.
inline void create_thread_caches_key() {
  ThreadPages<ThreadCaches>::create_key();
}

} // namespace ehelf::capi
