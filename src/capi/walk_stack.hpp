// Each thread's walk stack: the C library's walks (unw_init_local, unw_step, unw_backtrace) run
// on a stack of their own, so that they take a few hundred bytes of their caller's: a crash
// handler on an 8 KiB alternate signal stack (the legacy SIGSTKSZ) can unwind, where the walk
// itself needs about 10 KiB (the CFA program's fixed state, expression evaluation).
#pragma once

#include <cstdint>

#include "runtime/memory.hpp"

namespace ehelf::capi {

// fn(arg) on the calling thread's walk stack, which its first call maps (mmap: allowed in a
// signal handler) and the thread's exit unmaps. Walks nest (a signal handler interrupting a
// walk walks too): each level has its own part of the stack; beyond the last level, or when
// the stack cannot be mapped, fn runs on the caller's stack. Each level is 256 KiB of address
// space (pages touched only as used): a signal handler without an alternate stack that
// interrupts a walk runs there. `fn` must not throw. Under
// AddressSanitizer fn always runs on the caller's stack (ASan tracks one stack per thread).
int on_walk_stack(int (*fn)(void*), void* arg);

// The stack pointer of the code a walk runs for: on the walk stack, its caller's (from where
// on_walk_stack switched); elsewhere, the current one. What the thread's stack is found from.
uint64_t walk_caller_sp();
// `sp`, or if it is on the walk stack (a signal handler that interrupted a walk runs there when
// it has no alternate stack), the stack pointer the walk it interrupted was called from.
uint64_t sp_outside_walk_stack(uint64_t sp);
// The calling thread's walk stack ({0, 0} if it has none yet): walks from a handler running on
// it read it.
AddressRange walk_stack_range();

// Once, while the first LocalSpace is built (outside signal handlers): the thread-exit hook
// that unmaps a thread's walk stack.
void create_walk_stack_key();

} // namespace ehelf::capi
