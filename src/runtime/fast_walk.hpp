// FastWalk: the pcs-only walk for profilers and unw_backtrace, over a stack readable in this
// process (the calling thread's, or a copy: see LocalMemory's deltas). Frames whose rule is in
// the rule cache cost a few instructions and one dependent load when the cache has seen the call
// chain before (RuleCache's links); others fill the cache from the compact table (through the
// GeneralStep) or go through GeneralStep::step one at a time (signal frames, expressions, other
// backends, frame pointers).
//
// A FastWalk is two pointers, made for each walk: the GeneralStep it runs over and the rule
// cache it fills. Threads may share the GeneralStep (see general_step.hpp), never a cache.
#pragma once

#include "runtime/frame_address.hpp"

#include <cstdint>
#include <span>

#include "runtime/general_step.hpp"

namespace ehelf {

// The registers a walk from a frame needs: its pc, rsp, rbp and rbx (the last two may be
// unknown: see FastWalk::direct's validity mask).
struct WalkStart {
  uint64_t pc = 0, sp = 0, bp = 0, bx = 0;
};

class FastWalk {
public:
  // A walk's stack bounds: the direct range holding rsp, read at address + delta.
  struct Bounds {
    uint64_t lo = 0, hi = 0; // hi: exclusive end; 0 when rsp is in no range
    int64_t delta = 0;
  };

  // `cache`: null walks every frame with the general step (a backend whose rules are not cached).
  FastWalk(GeneralStep& general, RuleCache* cache) : general_(general), cache_(cache) {}

  // Walks from `regs` through `memory`'s ranges, writing up to `limit` pcs (the first is regs'
  // own pc). Returns the frame count; `why` says why the walk ended. `first`: what regs.rip is
  // (an interrupted pc: ptrace, perf sample, signal context; or a return address).
  size_t direct(const RegisterState& regs, const LocalMemory& memory, uint64_t* pcs, size_t limit,
                StopReason* why, FrameAddress first);
  // A perf sample's walk (ehelf perf, bench/table1): from its registers (every recorded one)
  // over the copy of its stack's first bytes, [rsp, rsp + stack.size()) read at stack.data().
  // The same walk as direct() over that one range, with less to set up per walk.
  size_t sample(const RegisterState& regs, std::span<const uint8_t> stack, uint64_t* pcs,
                size_t limit, StopReason* why, FrameAddress first);
  // The same from the four registers of a WalkStart (rbp and rbx known) over one stack range,
  // with little to set up for a profiler's usual walk.
  size_t local(const WalkStart& start, AddressRange stack, uint64_t* pcs, size_t limit,
               StopReason* why, FrameAddress first);

private:
  // Where quick() stopped when it did not end the walk: `frames` pcs written, the last one's
  // frame not unwound yet, with its rsp and rbp (rbx unknown); frames < 2: nothing to resume.
  struct Resume {
    size_t frames = 0;
    uint64_t sp = 0, bp = 0;
  };
  // The walk behind direct and local: `bp_known`/`bx_known` say whether rbp and rbx are known.
  // `first`: the first frame's registers, all of them (direct's; null for local's four).
  // `resume`: quick()'s progress, taken up instead of walking again from the start.
  size_t walk(const WalkStart& start, bool bp_known, bool bx_known,
              std::span<const DirectRange> ranges, uint64_t* pcs, size_t limit, StopReason* why,
              bool exact_first, const RegisterState* first, const Resume& resume);
  // Where quick() starts, in the address space of the bytes it reads (stack address + delta):
  // the pc, rsp and rbp (rbp as is), the end of the stack's bytes, and the delta.
  struct FastStart {
    uint64_t pc, hsp, bp, hhi, delta;
  };
  // The walk of direct and local when every frame's rule is cached or cacheable and it ends at
  // the outermost frame, with little to set up, as a profiler's walks are; 0 when it did not (the
  // caller takes up `resume` with walk()).
  size_t quick(const FastStart& start, uint64_t* pcs, size_t limit, StopReason* why,
               bool exact_first, Resume& resume);
  // quick()'s walk, inlined where it is used (quick(), sample()). `resume` is left as it was
  // when the walk did not start (no room, no cache, no cacheable rule for the first frame):
  // callers pass a Resume{}.
  size_t fast_path(const FastStart& start, uint64_t* pcs, size_t limit, StopReason* why,
                   bool exact_first, Resume& resume);
  // direct() (and sample(), through sample_walk) when the quick path did not end the walk.
  __attribute__((noinline)) size_t direct_walk(const RegisterState& regs, const LocalMemory& memory,
                                               uint64_t* pcs, size_t limit, StopReason* why,
                                               bool exact_first, const Resume& resume);
  // sample() when the fast path did not end the walk: direct_walk over the stack copy.
  __attribute__((noinline, cold)) size_t sample_walk(const RegisterState& regs,
                                                     std::span<const uint8_t> stack, uint64_t* pcs,
                                                     size_t limit, StopReason* why,
                                                     bool exact_first, const Resume& resume);
  // Out of quick's way (it stays small): the first frame's fill, installed (null when the pc
  // has no cacheable rule), and the walk of a local stack by walk().
  __attribute__((noinline)) HotRule* fill_first(uint64_t lookup, uint64_t key);
  __attribute__((noinline)) size_t walk_local(const WalkStart& start, uint64_t lo, uint64_t hi,
                                              uint64_t* pcs, size_t limit, StopReason* why,
                                              bool exact_first, const Resume& resume);
  // A walk's registers between frames.
  struct WalkRegs {
    uint64_t pc, sp, bp, bx;
    bool bp_ok, bx_ok;
    bool exact; // pc is an interrupted instruction, looked up as is

    // The four a walk tracks, of a frame whose registers a general step gave.
    static WalkRegs of(const RegisterState& r, bool exact) {
      return WalkRegs{r.get(x86_64::RIP),
                      r.get(x86_64::RSP),
                      r.get(x86_64::RBP),
                      r.get(x86_64::RBX),
                      r.has(x86_64::RBP),
                      r.has(x86_64::RBX),
                      exact};
    }
  };
  // One GeneralStep::step of a walk, out of line: the fast walk's function stays small.
  // `interrupted`: every register of an interrupted frame (the first, or one under a signal
  // frame) where they are known, since its rule may read any of them (the return address in
  // rcx of libgcc's `jmp *%rcx`, a DRAP prologue's r10); in: this frame's when regs.exact, out:
  // the caller's when it is an interrupted frame too, else none.
  // `after_signal`: where the registers of a signal frame's caller are kept (`interrupted` then
  // points there).
  __attribute__((noinline)) StopReason general_step(WalkRegs& regs,
                                                    std::span<const DirectRange> ranges,
                                                    const RegisterState*& interrupted,
                                                    RegisterState& after_signal);
  // GeneralStep::step alone (every register tracked, no cache) from `regs`, frame pcs[0]'s
  // (`exact`: an interrupted pc), until `frames` pcs are written (pcs[0] too), `limit` are
  // (DepthLimit) or a step fails (its reason in `why`, else None). Returns the pcs written;
  // `regs` and `exact` end as the last one's frame.
  size_t general_frames(RegisterState& regs, LocalMemory& memory, bool& exact, uint64_t* pcs,
                        size_t frames, size_t limit, StopReason& why);

  GeneralStep& general_;
  RuleCache* cache_;
};

} // namespace ehelf
