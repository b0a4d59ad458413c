// Unwinding the calling thread: capture its registers, then walk with LocalMemory.
#pragma once

#include <cstdint>

#include "model/register_state.hpp"

extern "C" void ehelf_capture_context(uint64_t regs[17]);

namespace ehelf {

// The caller's registers as they are when this returns (rip = the return address). Inline so
// that "the caller" is the function that calls capture_local().
__attribute__((always_inline)) inline RegisterState capture_local() {
  uint64_t raw[17];
  ehelf_capture_context(raw);
  RegisterState r;
  for (unsigned i = 0; i < 17; ++i) r.set(i, raw[i]);
  return r;
}

} // namespace ehelf
