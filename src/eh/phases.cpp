// The Itanium C++ ABI's unwinding calls as libgcc_s has them (unwind.inc): the two-phase raise,
// resume from a landing pad, forced unwinding, backtraces. Each starts from its own context
// (unw_getcontext in its own frame) and walks with FrameWalk; the personality routines are
// called exactly as libgcc calls them.
//
// The exception's private fields mean what they mean in libgcc, so that an exception raised by
// one unwinder can be resumed by the other (glibc's pthread_exit raises with libgcc's
// _Unwind_ForcedUnwind, our _Unwind_Resume continues it from a C++ landing pad; libc's own
// cleanups resume through libgcc): private_1 is the stop function (0: a normal exception),
// private_2 the stop argument, or for a normal exception in its cleanup phase the handler
// frame's identity (libgcc's "CFA" of its context, i.e. its stack pointer, minus 1 for a signal
// frame: uw_identify_context).
#include <cstdlib>
#include <unwind.h>

#include "eh/context.hpp"
#include "eh/counters.hpp"
#include "eh/frames.hpp"
#include "eh/install.hpp"
#include "eh/libgcc.hpp"
#include "eh/trail.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#define EH_API extern "C" __attribute__((visibility("default")))

namespace ehelf::eh {

namespace {

// When our walk cannot finish what libgcc_s could, the raise or the resume is handed to
// libgcc_s's own, from the entry point's frame: a frame only libgcc_s knows (registered with its
// __register_frame: JIT code), or a library the runtime did not find while another thread was
// loading or unloading one (the runtime reads the loader's list without its lock, and a library
// met while the list changes ends the walk; libgcc_s takes the loader's lock). Exact, because
// what was done before changes nothing: a search phase, or a cleanup phase before any landing
// (the personalities that said "continue" are called again by libgcc_s). An exception no handler
// takes is searched for again by libgcc_s before the caller terminates.
constexpr auto kToLibgccRaise = static_cast<_Unwind_Reason_Code>(0x100);  // redo both phases
constexpr auto kToLibgccResume = static_cast<_Unwind_Reason_Code>(0x101); // redo the cleanup

bool libgcc_there() {
  const libgcc::Functions& f = libgcc::functions();
  return f.raise_exception && f.resume && f.forced_unwind;
}

// Before handing over to libgcc_s, which lands without returning through our frames.
void leaving_our_frames() {
#if defined(__SANITIZE_ADDRESS__)
  __asan_handle_no_return(); // their redzones' poison must not stay on the stack
#endif
}

uint64_t identity(const _Unwind_Context& ctx) {
  return ctx.cfa - ((ctx.flags & kSignalFrameBit) ? 1 : 0);
}

_Unwind_Reason_Code personality(const _Unwind_Context& ctx, _Unwind_Action actions,
                                _Unwind_Exception* exc) {
  auto fn = reinterpret_cast<_Unwind_Personality_Fn>(ctx.personality);
  return fn(1, actions, exc->exception_class, exc, const_cast<_Unwind_Context*>(&ctx));
}

// Phase 2 in one frame: its personality lands in it (install does not return) or lets the unwind
// go on (true); any other answer is a phase 2 error (false).
bool land_or_go_on(_Unwind_Context& ctx, _Unwind_Action actions, _Unwind_Exception* exc) {
  switch (personality(ctx, actions, exc)) {
  case _URC_INSTALL_CONTEXT:
    install(ctx);
  case _URC_CONTINUE_UNWIND:
    return true;
  default:
    return false;
  }
}

// Phase 1: the frame whose personality has a handler; its identity in `handler`. The frames it
// walks that have a personality, past the first, are recorded in the thread's trail (trail.hpp),
// its serial in `trail_serial` (0: none).
_Unwind_Reason_Code search(const unw_context_t& uc, _Unwind_Exception* exc, uint64_t& handler,
                           uint64_t& trail_serial) {
  trail_serial = 0;
  FrameWalk walk;
  if (!walk.start(uc)) return _URC_FATAL_PHASE1_ERROR;
  const ClaimedTrail claimed(*walk.context().cursor.local);
  Trail* trail = claimed.get();
  if (trail) trail_serial = trail->begin();
  for (bool first = true;; first = false) {
    _Unwind_Context& ctx = walk.context();
    if (!ctx.has_fde) return _URC_END_OF_STACK; // the end, or a frame we cannot unwind
    if (ctx.personality) {
      // (the cleanup starts on the first frame itself)
      if (trail && !first && trail->count < Trail::kFrames)
        walk.record(trail->frames[trail->count++]);
      switch (personality(ctx, _UA_SEARCH_PHASE, exc)) {
      case _URC_HANDLER_FOUND:
        handler = identity(ctx);
        return _URC_NO_REASON;
      case _URC_CONTINUE_UNWIND:
        break;
      default:
        return _URC_FATAL_PHASE1_ERROR;
      }
    }
    if (walk.advance() < 0) return _URC_FATAL_PHASE1_ERROR;
  }
}

// Where a cleanup phase is in the thread's trail (trail.hpp): serial 0 when it steps.
struct TrailUse {
  uint64_t serial = 0;
  // The index of the trail's next frame: the first frame above the current one with a
  // personality (the frames between have nothing to do in a cleanup phase, and are passed over).
  unsigned next = 0;
};

// The trail's next frame made the walk's current frame; false when the trail no longer holds it
// (another raise wrote the trail since, or it is busy).
bool take_from_trail(FrameWalk& walk, TrailUse& use) {
  const ClaimedTrail claimed(*walk.context().cursor.local);
  const Trail* trail = claimed.get();
  if (!trail || trail->serial != use.serial || use.next >= trail->count) return false;
  walk.assume(trail->frames[use.next++]);
  return true;
}

// Before landing in the current frame: where, if it is the trail's frame.
void note_landing(FrameWalk& walk, const TrailUse& use, _Unwind_Exception* exc) {
  const ClaimedTrail claimed(*walk.context().cursor.local);
  Trail* trail = claimed.get();
  if (!trail) return;
  trail->landed = Trail::kNone;
  if (!use.serial || trail->serial != use.serial || use.next == 0) return;
  trail->landed = use.next - 1;
  trail->exception = exc;
  trail->landed_sp = walk.context().cursor.regs.get(x86_64::RSP);
}

// A landing pad's _Unwind_Resume, its walk on the landing frame: the trail's frames above it, if
// the trail's last landing was in this frame for `exc`. The frame is told by its stack pointer,
// which the landing pad calls _Unwind_Resume with (the one installed), not by its function: the
// pad is often in a .cold part of its own, another FDE.
TrailUse trail_after_landing(FrameWalk& walk, _Unwind_Exception* exc) {
  const _Unwind_Context& ctx = walk.context();
  const ClaimedTrail claimed(*ctx.cursor.local);
  const Trail* trail = claimed.get();
  if (!trail || !trail->serial || trail->exception != exc || trail->landed >= trail->count ||
      !ctx.has_fde || !ctx.cursor.regs.has(x86_64::RSP) ||
      trail->landed_sp != ctx.cursor.regs.get(x86_64::RSP))
    return {};
  return {trail->serial, trail->landed + 1};
}

// Phase 2 of a normal exception: cleanups up to the handler frame (exc->private_2), then its
// handler. Returns only on failure. `use`: the search phase's trail of the walk from the same
// context (raise), whose frames are taken instead of stepped while it holds them; `resuming`:
// a landing pad's _Unwind_Resume, which takes the trail's frames above the landing frame.
_Unwind_Reason_Code cleanup(const unw_context_t& uc, _Unwind_Exception* exc, TrailUse use,
                            bool resuming) {
  FrameWalk walk;
  if (!walk.start(uc)) return _URC_FATAL_PHASE2_ERROR;
  for (unsigned frame = 0;; ++frame) {
    _Unwind_Context& ctx = walk.context();
    if (!ctx.has_fde) return _URC_FATAL_PHASE2_ERROR;
    // The landing frame, above _Unwind_Resume's own.
    if (resuming && frame == 1) use = trail_after_landing(walk, exc);
    const bool handler_frame = identity(ctx) == exc->private_2;
    if (ctx.personality) {
      const auto actions =
          static_cast<_Unwind_Action>(_UA_CLEANUP_PHASE | (handler_frame ? _UA_HANDLER_FRAME : 0));
      switch (personality(ctx, actions, exc)) {
      case _URC_INSTALL_CONTEXT:
        note_landing(walk, use, exc);
        install(ctx);
      case _URC_CONTINUE_UNWIND:
        break;
      default:
        return _URC_FATAL_PHASE2_ERROR;
      }
    }
    // The handler frame declined to take the exception it claimed in phase 1.
    if (handler_frame) return _URC_FATAL_PHASE2_ERROR;
    if (use.serial && take_from_trail(walk, use)) continue;
    use.serial = 0; // from here on stepped (a frame stepped is not the trail's next)
    if (walk.advance() < 0) return _URC_FATAL_PHASE2_ERROR;
  }
}

// Phase 2 of a forced unwind (private_1: the stop function, private_2: its argument): the stop
// function sees every frame, the end of the stack too, before the frame's personality.
_Unwind_Reason_Code forced(const unw_context_t& uc, _Unwind_Exception* exc) {
  auto stop = reinterpret_cast<_Unwind_Stop_Fn>(exc->private_1);
  void* stop_argument = reinterpret_cast<void*>(exc->private_2);
  FrameWalk walk;
  if (!walk.start(uc)) return _URC_FATAL_PHASE2_ERROR;
  // Where our walk cannot go on (no FDE, a caller it cannot find), libgcc_s's can: the forced
  // unwind is handed over (libgcc_s calls the stop function again for the frames this walk
  // already showed it, each with the personality's "continue": glibc's stop function, which
  // pthread_exit and pthread_cancel use, runs each cleanup once whatever it is shown).
  const auto stuck = [] { return libgcc_there() ? kToLibgccResume : _URC_FATAL_PHASE2_ERROR; };
  for (;;) {
    _Unwind_Context& ctx = walk.context();
    if (!ctx.has_fde && !ctx.end) return stuck();
    const bool end = ctx.end;
    auto actions = static_cast<_Unwind_Action>(_UA_FORCE_UNWIND | _UA_CLEANUP_PHASE);
    if (end) actions = static_cast<_Unwind_Action>(actions | _UA_END_OF_STACK);
#if defined(__SANITIZE_ADDRESS__)
    // The stop function may longjmp out of these frames (glibc's does, at the thread's start):
    // their redzones' poison would stay on the stack the thread goes on using.
    __asan_handle_no_return();
#endif
    if (stop(1, actions, exc->exception_class, exc, &ctx, stop_argument) != _URC_NO_REASON)
      return _URC_FATAL_PHASE2_ERROR;
    if (end) return _URC_END_OF_STACK;
    if (ctx.personality &&
        !land_or_go_on(ctx, static_cast<_Unwind_Action>(_UA_FORCE_UNWIND | _UA_CLEANUP_PHASE), exc))
      return _URC_FATAL_PHASE2_ERROR;
    if (walk.advance() < 0) return stuck();
  }
}

// _Unwind_RaiseException's work, from the context taken in the caller's frame. Returns only on
// failure: END_OF_STACK (uncaught: the caller terminates), or a hand-over to libgcc_s.
_Unwind_Reason_Code raise(const unw_context_t& uc, _Unwind_Exception* exc) {
  uint64_t handler = 0, trail = 0;
  const _Unwind_Reason_Code found = search(uc, exc, handler, trail);
  if (found != _URC_NO_REASON) return libgcc_there() ? kToLibgccRaise : found;
  exc->private_1 = 0;
  exc->private_2 = handler;
  // (the cleanup's first frame is the search's first, which the trail does not hold)
  const _Unwind_Reason_Code failed = cleanup(uc, exc, TrailUse{trail, 0}, false);
  return libgcc_there() ? kToLibgccResume : failed;
}

// Hands the exception to libgcc_s's _Unwind_RaiseException or _Unwind_Resume (the latter does
// not return).
_Unwind_Reason_Code to_libgcc(_Unwind_Reason_Code how, _Unwind_Exception* exc) {
  count(g_counters.handed);
  leaving_our_frames();
  if (how == kToLibgccRaise) return libgcc::functions().raise_exception(exc);
  libgcc::functions().resume(exc);
  std::abort();
}

} // namespace

} // namespace ehelf::eh

namespace eh = ehelf::eh;

// Each entry point takes its context in its own frame: the walks start there (frames without
// a personality are passed over) and install into frames above it.
// noinline: the context must be this function's own frame.

EH_API __attribute__((noinline)) _Unwind_Reason_Code
_Unwind_RaiseException(_Unwind_Exception* exc) {
  eh::count(eh::g_counters.raises);
  unw_context_t uc;
  unw_getcontext(&uc);
  const _Unwind_Reason_Code code = eh::raise(uc, exc);
  if (code == eh::kToLibgccRaise || code == eh::kToLibgccResume) return eh::to_libgcc(code, exc);
  return code;
}

EH_API __attribute__((noinline)) void _Unwind_Resume(_Unwind_Exception* exc) {
  eh::count(eh::g_counters.resumes);
  unw_context_t uc;
  unw_getcontext(&uc);
  if (exc->private_1 == 0) {
    (void)eh::cleanup(uc, exc, eh::TrailUse{}, true);
    if (eh::libgcc_there()) (void)eh::to_libgcc(eh::kToLibgccResume, exc);
  } else if (eh::forced(uc, exc) == eh::kToLibgccResume) {
    (void)eh::to_libgcc(eh::kToLibgccResume, exc);
  }
  std::abort(); // libgcc aborts too: a landing pad's exception must land somewhere
}

EH_API __attribute__((noinline)) _Unwind_Reason_Code
_Unwind_Resume_or_Rethrow(_Unwind_Exception* exc) {
  unw_context_t uc;
  unw_getcontext(&uc);
  // A normal exception is raised again (both phases: its handler may be elsewhere now).
  if (exc->private_1 == 0) {
    eh::count(eh::g_counters.raises);
    const _Unwind_Reason_Code code = eh::raise(uc, exc);
    if (code == eh::kToLibgccRaise || code == eh::kToLibgccResume) return eh::to_libgcc(code, exc);
    return code;
  }
  eh::count(eh::g_counters.resumes);
  // Returns only without a landing pad (libgcc asserts there), or to hand over.
  if (eh::forced(uc, exc) == eh::kToLibgccResume) (void)eh::to_libgcc(eh::kToLibgccResume, exc);
  std::abort();
}

EH_API __attribute__((noinline)) _Unwind_Reason_Code
_Unwind_ForcedUnwind(_Unwind_Exception* exc, _Unwind_Stop_Fn stop, void* stop_argument) {
  eh::count(eh::g_counters.forced);
  unw_context_t uc;
  unw_getcontext(&uc);
  exc->private_1 = reinterpret_cast<_Unwind_Ptr>(stop);
  exc->private_2 = reinterpret_cast<_Unwind_Ptr>(stop_argument);
  const _Unwind_Reason_Code code = eh::forced(uc, exc);
  if (code != eh::kToLibgccResume) return code;
  eh::count(eh::g_counters.handed);
  eh::leaving_our_frames();
  return eh::libgcc::functions().forced_unwind(exc, stop, stop_argument);
}

EH_API void _Unwind_DeleteException(_Unwind_Exception* exc) {
  if (exc->exception_cleanup) exc->exception_cleanup(_URC_FOREIGN_EXCEPTION_CAUGHT, exc);
}

// As libgcc: the first frame is the caller's; after the outermost frame the trace function is
// called once more with pc 0, and the walk ends with _URC_END_OF_STACK.
EH_API __attribute__((noinline)) _Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn trace,
                                                                       void* trace_argument) {
  eh::count(eh::g_counters.backtraces);
  unw_context_t uc;
  unw_getcontext(&uc);
  eh::FrameWalk walk;
  if (!walk.start(uc)) return _URC_FATAL_PHASE1_ERROR;
  if (walk.advance() < 0) return _URC_FATAL_PHASE1_ERROR; // past this function's own frame
  for (;;) {
    _Unwind_Context& ctx = walk.context();
    const _Unwind_Reason_Code code = ctx.has_fde ? _URC_NO_REASON : _URC_END_OF_STACK;
    if (trace(&ctx, trace_argument) != _URC_NO_REASON) return _URC_FATAL_PHASE1_ERROR;
    if (code == _URC_END_OF_STACK) return code;
    const int step = walk.advance();
    // A caller in code the runtime does not know ends the walk, as an unknown one ends libgcc's.
    if (step == eh::FrameWalk::kLostCaller) return _URC_END_OF_STACK;
    if (step < 0) return _URC_FATAL_PHASE1_ERROR;
  }
}
