// A raise's trail: the frames its search phase walked that have a personality routine (past the
// first, where the cleanup starts), kept so that its cleanup phase, which walks the same frames
// from the same context up to the handler, takes them from here instead of stepping each again
// (libgcc steps every frame twice: the cleanup phase is half of a throw's unwinding). The frames
// without a personality are not kept: a cleanup phase has nothing to do in them (no personality
// to call, and none is the handler's, which the search found through its personality), so the
// cleanup goes from one kept frame to the next. Nothing runs on those frames between the phases
// (the personalities' search-phase calls only read), so each recorded frame is what the
// cleanup's step would compute; past the trail (more than kFrames such frames) the cleanup steps
// from the last one taken, as before.
//
// In capi::ThreadPages (the thread's own pages, no malloc, no lock): the search phase holds the
// trail for its walk; the cleanup phase claims it for each frame it takes (a landing pad is
// entered without returning, so nothing may stay claimed across a personality call), and uses
// it only while it is still its raise's (`serial`): a throw in a signal handler, or a nested
// raise of a destructor between two frames, makes a new trail, and the cleanup steps from there.
// A landing pad's _Unwind_Resume goes on from the trail too, above the frame it landed in, once
// it finds that frame where the landing left it (`landed`).
#pragma once

#include <cstdint>

#include "capi/thread_pages.hpp"
#include "model/register_state.hpp"

namespace ehelf::eh {

// One frame as FrameWalk holds it (frames.hpp): its registers and what its FDE says.
struct TrailFrame {
  RegisterState regs;
  uint64_t ra = 0, cfa = 0, lsda = 0, func = 0, personality = 0, flags = 0;
  bool exact = false, has_fde = false;
};

static_assert(sizeof(TrailFrame) == 200);

struct Trail {
  // A throw through more frames is taken from here for its first kFrames (200 bytes a frame:
  // 50 KiB a thread, mapped on its first throw).
  static constexpr unsigned kFrames = 256;
  static constexpr unsigned kNone = ~0u;
  uint64_t serial = 0;      // of the raise that wrote it (0: none)
  uint64_t last_serial = 0; // the thread's last (kept by clear: a serial is never given twice)
  unsigned count = 0;
  // The cleanup phase's last landing from the trail: the frame's index, the exception, and the
  // stack pointer installed. The landing pad's _Unwind_Resume walks from that frame again: when
  // its stack pointer is this one for the same exception (the same frame: no other frame of the
  // stack has it), the frames above it are the trail's from landed + 1.
  unsigned landed = kNone;
  const void* exception = nullptr;
  uint64_t landed_sp = 0;
  TrailFrame frames[kFrames];
  void clear() {
    serial = 0;
    count = 0;
    landed = kNone;
  }
  // A new trail for a raise; its serial.
  uint64_t begin() {
    count = 0;
    landed = kNone;
    serial = ++last_serial;
    return serial;
  }
};

using ClaimedTrail = capi::ThreadPages<Trail>::Claimed;

// Once at load: the thread-exit hook.
inline void create_trail_key() {
  capi::ThreadPages<Trail>::create_key();
}

} // namespace ehelf::eh
