#include "capi/backtrace.hpp"

#include <cstdint>

#include "capi/address_space.hpp"
#include "capi/thread_caches.hpp"
#include "capi/walk_stack.hpp"

namespace ehelf::capi {

namespace {

// ---- unw_backtrace ------------------------------------------------------------------------

// The ranges unw_backtrace's walk reads: the thread's stack, and the alternate signal stack when
// the walk starts on it (a walk starting on the thread's stack never reaches it, and asking
// costs a system call).
void backtrace_ranges(uint64_t sp, LocalMemory& mem) {
  const uint64_t own = sp_outside_walk_stack(sp); // a handler on the walk stack: its thread's
  AddressRange stack = thread_stack_at(own);
  if (own == sp && stack.contains(sp, 8))
    mem.add(stack);
  else
    local_ranges(mem);
}

bool in_ranges(const LocalMemory& mem, uint64_t sp) {
  for (const DirectRange& r : mem.ranges())
    if (sp >= r.begin && sp < r.end) return true;
  return false;
}

static_assert(sizeof(void*) == sizeof(uint64_t), "pcs are written to the void* buffer in place");

// The fast walk, with the thread's rule cache, straight into `buffer`. Returns the frame count,
// or -1 when step_walk should do it: the cache is in use (a signal handler interrupted a walk)
// or the walk stopped where a step may get further (memory outside the stack ranges, which
// step_walk reads with process_vm_readv; a return address with no FDE before it).
// `unknown_end`: the walk ended at a pc in no known module (left out of the list).
int direct_walk(LocalSpace& s, const RegisterState& regs, const LocalMemory& mem, void** buffer,
                int size, bool& unknown_end) {
  const ClaimedCaches claimed(s);
  ThreadCaches* caches = claimed.get();
  if (!caches) return -1;
  auto* pcs = reinterpret_cast<uint64_t*>(buffer); // the library is built -fno-strict-aliasing
  StopReason why = StopReason::None;
  size_t n = 0;
  try {
    // As deep as the caller's buffer, as libunwind's.
    // (the first pc is unw_backtrace's caller's return address)
    n = FastWalk(s.walker, &caches->rules)
            .direct(regs, mem, pcs, static_cast<size_t>(size), &why, FrameAddress::ReturnAddress);
  } catch (...) { // only error paths allocate (their messages)
    why = StopReason::BadRead;
  }
  if (why == StopReason::BadRead || why == StopReason::NoTable) return -1;
  // Every pc but the last was unwound, so is in a known module; the last ends the list when it
  // is in none, as in step_walk.
  unknown_end = why == StopReason::NoModule && n > 0 && !known_pc(s.map, pcs[n - 1]);
  return static_cast<int>(unknown_end ? n - 1 : n);
}

// The walk step by step (no rule cache), reading memory outside the stack ranges too.
int step_walk(LocalSpace& s, RegisterState regs, SelfMemory& mem, void** buffer, int size,
              bool& unknown_end) {
  FrameInfo info;
  bool exact = false; // the caller's pc is a return address
  int n = 0;
  try {
    while (n < size) {
      const uint64_t pc = regs.get(x86_64::RIP);
      buffer[n++] = reinterpret_cast<void*>(pc);
      const StopReason r = s.walker.step(regs, mem, exact, info, nullptr);
      if (r == StopReason::NoModule && !known_pc(s.map, pc)) {
        // A pc in no module that rbp does not lead on from (JIT code is followed by rbp): not
        // code the walk can vouch for, so not listed (as direct_walk's unknown_end).
        --n;
        unknown_end = true;
      }
      if (r != StopReason::None) break;
      exact = info.signal_frame;
    }
  } catch (...) { // only error paths allocate (their messages)
  }
  return n;
}

// unw_backtrace's list in space `s`: the fast walk where it can, else the step walk.
int backtrace_in(LocalSpace& s, const WalkStart& caller, void** buffer, int size,
                 bool& unknown_end) {
  RegisterState regs;
  regs.set(x86_64::RIP, caller.pc);
  regs.set(x86_64::RSP, caller.sp);
  regs.set(x86_64::RBP, caller.bp);
  regs.set(x86_64::RBX, caller.bx);
  SelfMemory mem;
  backtrace_ranges(caller.sp, mem.stacks);
  unknown_end = false;
  if (in_ranges(mem.stacks, caller.sp)) {
    int n = direct_walk(s, regs, mem.stacks, buffer, size, unknown_end);
    if (n >= 0) return n;
  }
  return step_walk(s, regs, mem, buffer, size, unknown_end);
}

} // namespace

// Reads the space only: no staleness check (dl_iterate_phdr takes the loader's lock, which a
// profiler's handler may have interrupted), no allocation; a list ends at a pc in no module the
// space knows (see address_space.hpp).
int backtrace_from(const WalkStart& caller, void** buffer, int size) {
  if (!buffer || size <= 0) return 0;
  LocalSpace* s = local_space();
  if (!s) return 0;
  bool unknown_end = false;
  int n = backtrace_in(*s, caller, buffer, size, unknown_end);
  // A library loaded after the space was built and since replaced at its address: walked
  // again with what is there now.
  if (!s->late.check_slots_at(reinterpret_cast<const uint64_t*>(buffer), static_cast<size_t>(n)))
    n = backtrace_in(*s, caller, buffer, size, unknown_end);
  return n;
}

} // namespace ehelf::capi
