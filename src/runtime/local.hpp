// Unwinding the calling thread: capture its registers, then walk with LocalMemory.
#pragma once

#include <cstdint>

#include "model/register_state.hpp"
#include "runtime/unwinder.hpp"

extern "C" void ehelf_capture_context(uint64_t regs[17]);
extern "C" void ehelf_capture_walk_start(uint64_t regs[4]);

namespace ehelf {

// The caller's registers as they are when this returns (rip = the return address). Inline so
// that "the caller" is the function that calls capture_local().
__attribute__((always_inline)) inline RegisterState capture_local() {
  RegisterState r;
  static_assert(sizeof(r.value) == 17 * sizeof(uint64_t));
  ehelf_capture_context(r.value.data());
  r.valid = (1u << 17) - 1;
  return r;
}

// The four registers a walk from the caller needs (cheaper than capture_local() when only the
// pcs are wanted).
__attribute__((always_inline)) inline WalkStart capture_walk_start() {
  WalkStart w;
  static_assert(sizeof(WalkStart) == 4 * sizeof(uint64_t));
  ehelf_capture_walk_start(reinterpret_cast<uint64_t*>(&w));
  return w;
}

} // namespace ehelf
