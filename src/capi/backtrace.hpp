// unw_backtrace in the local space: the fast walk over the space's walker with the calling
// thread's own rule cache (mapped with mmap on the thread's first call, unmapped at its exit),
// else the walker's general step.
#pragma once

#include "runtime/fast_walk.hpp"

namespace ehelf::capi {

// unw_backtrace from its caller's registers (backtrace.S): the caller's pc first.
int backtrace_from(const WalkStart& caller, void** buffer, int size);

} // namespace ehelf::capi
