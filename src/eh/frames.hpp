// Walking frames for the unwinder's phases: a context on one frame, with what its FDE says, and
// the step to its caller done ahead (whether the frame is the last one is known before its
// personality runs).
#pragma once

#include "eh/context.hpp"

namespace ehelf::eh {

class FrameWalk {
public:
  // The first frame is the caller of unw_getcontext that filled `uc`; false if the runtime has
  // no space (it could not be built).
  bool start(const unw_context_t& uc);
  // The current frame's context (valid after start).
  _Unwind_Context& context() { return ctx_; }
  // Whether the current frame is the last (its caller could not be found or is none).
  bool last() const { return next_state_ <= 0; }
  // Whether the step to the caller failed (a bad frame), rather than reached the end.
  bool broken() const { return next_state_ < 0; }
  // Moves to the caller. When the current frame is the last, to the end context (pc 0, no FDE),
  // as libgcc's walk ends.
  void advance();

private:
  void load(); // fills ctx_ from ctx_.cursor: FDE, CFA, next_
  _Unwind_Context ctx_;
  capi::Cursor next_;
  int next_state_ = 0; // capi::step's answer for next_: 1 a frame, 0 the end, < 0 an error
};

} // namespace ehelf::eh
