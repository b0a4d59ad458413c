// Walking frames for the unwinder's phases: a context on one frame, with what its FDE says,
// stepped to its caller in place (no cursor copied per frame).
#pragma once

#include "eh/context.hpp"
#include "eh/trail.hpp"

namespace ehelf::eh {

class FrameWalk {
public:
  // The first frame is the caller of unw_getcontext that filled `uc`; false if the runtime has
  // no space (it could not be built).
  bool start(const unw_context_t& uc);
  // The current frame's context (valid after start).
  _Unwind_Context& context() { return ctx_; }
  // Steps the context to the caller, in place (the frame's registers stay as they are until
  // then: a personality's landing is installed from them). 1: a frame; 0: the current frame
  // was the last, the context is now the end context (pc 0, no FDE, as libgcc's walk ends);
  // < 0: the caller could not be unwound (a bad frame), or kLostCaller: it is in code the
  // runtime does not know (JIT code, a library it did not find), where libgcc_s takes over; the
  // context is not to be used after either.
  int advance();
  static constexpr int kLostCaller = -1000;
  // The current frame, as a trail keeps it (trail.hpp).
  void record(TrailFrame& out) const;
  // Makes the current frame the one `f` recorded in a walk from the same context (the walk goes
  // on from it with advance(), as from a frame it stepped to).
  void assume(const TrailFrame& f);

private:
  // Fills ctx_ from ctx_.cursor: what the FDE says, the stack pointer. False when the frame's pc
  // is in no module the runtime knows.
  bool load();
  _Unwind_Context ctx_;
  capi::SelfMemory mem_; // the walk's memory: its stack ranges read directly
};

} // namespace ehelf::eh
