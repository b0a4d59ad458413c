#include "runtime/unwinder.hpp"

namespace ehelf {

size_t Unwinder::backtrace(RegisterState regs, MemoryReader& mem, FrameInfo* out, size_t max,
                           StopReason* why, bool exact_first) {
  size_t n = 0;
  bool exact = exact_first;
  StopReason r = StopReason::None;
  const size_t cap = limit(max);
  while (n < cap) {
    FrameInfo info;
    r = step(regs, mem, exact, info);
    if (info.pc || r == StopReason::None) out[n++] = info;
    if (r != StopReason::None) break;
    exact = info.signal_frame; // after a signal frame the pc is the interrupted instruction
  }
  if (n == cap && r == StopReason::None) r = StopReason::DepthLimit;
  if (why) *why = r;
  return n;
}

} // namespace ehelf
