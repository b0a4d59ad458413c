// The fast walk: pcs only, through the rule cache's hot forms and their caller links; frames it
// cannot take alone go to the general step (general_step.cpp) one at a time.
#include "runtime/fast_walk.hpp"

#include <algorithm>
#include <cstring>

namespace ehelf {

namespace {

// The fast walk bounds an rsp-based CFA (rsp + at most 32 KiB: hot_form) by the end of the bytes
// it reads alone, which is sound only if that sum cannot wrap around: ranges whose bytes end
// above this are left to the general step (no memory is there in practice: user space ends
// below 2^47; a caller's made-up range may be). The top half of the address space: one sign
// test checks it.
constexpr uint64_t kFastWalkEnd = uint64_t(1) << 63;

using Bounds = FastWalk::Bounds;

// Whether a sample's stack copy of `size` bytes at rsp `sp` is a range to read: not empty, and
// below the top half of the address space (user stacks are far below it; a hostile sample's
// range near 2^64 would let the fast walk's end-only bound wrap around).
bool sample_range_ok(uint64_t sp, uint64_t size) {
  constexpr uint64_t kTop = uint64_t(1) << 63;
  return size != 0 && sp < kTop && size <= kTop - sp;
}

// Whether the fast path may walk a sample: sample_range_ok(sp, size) but for size 0, and the
// copy's bytes, [lo, lo + size) in this process, below kFastWalkEnd; in one sign test (size, a
// span's, is below 2^63: no sum wraps around). An empty copy may pass: the fast path then takes
// no frame past the first (every CFA it accepts is above rsp and at most the end of the bytes)
// and the general walk, without memory as sample_range_ok says, decides as it would have.
static_assert(kFastWalkEnd == uint64_t(1) << 63, "sample_fast_ok tests the sign bit");
bool sample_fast_ok(uint64_t sp, uint64_t size, uint64_t lo) {
  return int64_t(sp | (sp + size - 1) | (lo + size)) >= 0;
}

Bounds bounds_for(std::span<const DirectRange> ranges, uint64_t sp) {
  for (const DirectRange& d : ranges)
    if (sp - d.begin < d.end - d.begin && d.end + static_cast<uint64_t>(d.delta) <= kFastWalkEnd)
      return Bounds{d.begin, d.end, d.delta};
  return {};
}

// The fast walk's state, in the address space of the bytes it reads (the stack's address +
// the range's delta: "host" addresses), where the bounds need no wrap-around care: the current
// frame's cached rule, rsp and rbp, and the next pc slot.
struct FastState {
  HotRule* cur;
  uint64_t hsp; // rsp + delta
  uint64_t bp;  // rbp itself; kUnknownBp - delta when unknown
  uint64_t* out;
};

// An unknown rbp, as FastState::bp holds it (minus the delta): a CFA computed from it is far
// above any host address, so it fails the bound.
constexpr uint64_t kUnknownBp = uint64_t(3) << 62;

enum class FastExit {
  Miss,     // out[-1] is a pc without a cacheable rule: the general step decides
  Declined, // cur's rule is kSlow, or its CFA fails the bound: the general step decides
  Full,     // no room for the caller's pc
  End,      // cur's rule says it is the outermost frame
};

// Follows the cached rules while the links predict the callers: per frame a load of the return
// address, a compare with the predicted entry's key, and the rbp reload when the frame saved it.
// Inlined into its callers: out of line, its state went through memory and a sample's walk cost
// ~50 instructions more (callgrind, bench/table1).
//
// `hhi`: the end of the stack's bytes (host); `delta`: host minus stack addresses.
// `kCounted`: the pcs written are checked against `end`. Unneeded when the stack's bytes cannot
// hold more frames than `end` has room for: every frame the fast path takes moves the CFA up by
// 8 at least (an rsp-based CFA is rsp + 8 or more: hot_form; an rbp-based one is taken only at
// rsp + 16 or more), and the CFA stays below `hhi`.
// `fill(lookup, key, slot)` fills a slot on a cache miss (false: the pc has no cacheable rule).
template <bool kCounted, typename Fill>
__attribute__((always_inline)) inline FastExit fast_walk_loop(RuleCache& cache, uint64_t hhi,
                                                              uint64_t delta, FastState& st,
                                                              uint64_t* end, Fill&& fill) {
  // Entries by byte offset from the cache's start, as links hold them: the loop reads the next
  // entry through its link without forming its address first.
  char* const base = reinterpret_cast<char*>(&cache.at(0));
  auto at = [base](size_t offset) -> HotRule& {
    return *reinterpret_cast<HotRule*>(base + offset);
  };
  size_t cur = cache.offset_of(*st.cur);
  uint64_t hsp = st.hsp, bp = st.bp;
  uint64_t* out = st.out;
  FastExit why;
  for (;;) {
    uint64_t hcfa, ret;
    const HotStep step = hot_step(at(cur), hsp, bp, hcfa, ret, hhi, delta);
    if (step != HotStep::Taken) [[unlikely]] {
      why = step == HotStep::End ? FastExit::End : FastExit::Declined;
      break;
    }
    if (kCounted && out == end) [[unlikely]] {
      why = FastExit::Full;
      break;
    }
    *out++ = ret;
    hsp = hcfa;
    // The next rule: by a link, else by the pc's slot (then linked, the older link dropped).
    // An empty entry can match only ret == 0, which the fast path declines (kSlow).
    size_t next = at(cur).next[0];
    if (at(next).key != ret) [[unlikely]] {
      next = at(cur).next[1];
      if (at(next).key != ret) {
        HotRule* found = cache.find(ret);
        if (!found) {
          found = &cache.make_room(ret);
          if (!fill(ret - 1, ret, *found)) {
            why = FastExit::Miss;
            break;
          }
        }
        next = cache.offset_of(*found);
        at(cur).next[1] = at(cur).next[0];
        at(cur).next[0] = static_cast<uint16_t>(next);
      }
    }
    cur = next;
  }
  st = FastState{&at(cur), hsp, bp, out};
  return why;
}

template <typename Fill>
__attribute__((always_inline)) inline FastExit fast_walk(RuleCache& cache, uint64_t hhi,
                                                         uint64_t delta, FastState& st,
                                                         uint64_t* end, Fill&& fill) {
  if ((hhi - st.hsp) / 8 <= static_cast<uint64_t>(end - st.out)) [[likely]]
    return fast_walk_loop<false>(cache, hhi, delta, st, end, fill);
  return fast_walk_loop<true>(cache, hhi, delta, st, end, fill);
}

} // namespace

__attribute__((always_inline)) inline size_t FastWalk::fast_path(const FastStart& q, uint64_t* pcs,
                                                                 size_t limit, StopReason* why,
                                                                 bool exact_first, Resume& resume) {
  if (limit < 2 || !cache_) [[unlikely]]
    return 0;
  pcs[0] = q.pc;
  const uint64_t key = RuleCache::key(q.pc, exact_first);
  RuleCache& cache = *cache_;
  HotRule* first = cache.find(key);
  if (!first) [[unlikely]]
    first = fill_first(exact_first ? q.pc : q.pc - 1, key);
  if (!first || first->op == HotRule::kEmpty) [[unlikely]]
    return 0;
  FastState st{first, q.hsp, q.bp, pcs + 1};
  GeneralStep& general = general_;
  const FastExit exit = fast_walk(cache, q.hhi, q.delta, st, pcs + limit,
                                  [&general, &cache](uint64_t l, uint64_t k, HotRule& h) {
                                    return general.fill_hot(cache, l, k, h);
                                  });
  if (exit == FastExit::End || exit == FastExit::Full) [[likely]] { // End: the usual end
    if (why) *why = exit == FastExit::End ? StopReason::EndOfStack : StopReason::DepthLimit;
    return static_cast<size_t>(st.out - pcs);
  }
  if (st.out != pcs + 1 && st.out[-1] == 0) { // no caller: the outermost frame
    if (why) *why = StopReason::EndOfStack;
    return static_cast<size_t>(st.out - 1 - pcs);
  }
  resume = Resume{static_cast<size_t>(st.out - pcs), st.hsp - q.delta, st.bp};
  return 0;
}

size_t FastWalk::quick(const FastStart& q, uint64_t* pcs, size_t limit, StopReason* why,
                       bool exact_first, Resume& resume) {
  return fast_path(q, pcs, limit, why, exact_first, resume);
}

size_t FastWalk::direct(const RegisterState& start, const LocalMemory& memory, uint64_t* pcs,
                        size_t limit, StopReason* why, FrameAddress first) {
  const bool exact_first = is_exact(first);
  // A sample's usual walk: pc, rsp and rbp known, rsp in the first range (a stack copy).
  constexpr uint32_t kQuick = 1u << x86_64::RIP | 1u << x86_64::RSP | 1u << x86_64::RBP;
  const std::span<const DirectRange> ranges = memory.ranges();
  if ((start.valid & kQuick) == kQuick && !ranges.empty()) [[likely]] {
    const DirectRange& d = ranges.front();
    const uint64_t sp = start.get(x86_64::RSP), delta = static_cast<uint64_t>(d.delta);
    if (sp - d.begin < d.end - d.begin && d.end + delta <= kFastWalkEnd) {
      const FastStart q{start.get(x86_64::RIP), sp + delta, start.get(x86_64::RBP), d.end + delta,
                        delta};
      Resume resume;
      if (size_t n = quick(q, pcs, limit, why, exact_first, resume)) return n;
      return direct_walk(start, memory, pcs, limit, why, exact_first, resume);
    }
  }
  return direct_walk(start, memory, pcs, limit, why, exact_first, Resume{});
}

size_t FastWalk::sample(const RegisterState& regs, std::span<const uint8_t> stack, uint64_t* pcs,
                        size_t limit, StopReason* why, FrameAddress first) {
  const bool exact_first = is_exact(first);
  // What direct() does over the one range [rsp, rsp + size) at stack.data(), in one function:
  // the walk's fallback is the only call left, out of line, and needs no range list.
  constexpr uint32_t kQuick = 1u << x86_64::RIP | 1u << x86_64::RSP | 1u << x86_64::RBP;
  const uint64_t sp = regs.value[x86_64::RSP];
  const uint64_t lo = reinterpret_cast<uint64_t>(stack.data()), hhi = lo + stack.size();
  Resume resume;
  if ((regs.valid & kQuick) == kQuick && sample_fast_ok(sp, stack.size(), lo)) [[likely]]
    if (size_t n =
            fast_path(FastStart{regs.value[x86_64::RIP], lo, regs.value[x86_64::RBP], hhi, lo - sp},
                      pcs, limit, why, exact_first, resume))
      return n;
  return sample_walk(regs, stack, pcs, limit, why, exact_first, resume);
}

size_t FastWalk::sample_walk(const RegisterState& regs, std::span<const uint8_t> stack,
                             uint64_t* pcs, size_t limit, StopReason* why, bool exact_first,
                             const Resume& resume) {
  const uint64_t sp = regs.value[x86_64::RSP];
  LocalMemory memory;
  if (sample_range_ok(sp, stack.size()))
    memory.add(AddressRange{sp, sp + stack.size()},
               static_cast<int64_t>(reinterpret_cast<uint64_t>(stack.data()) - sp));
  return direct_walk(regs, memory, pcs, limit, why, exact_first, resume);
}

size_t FastWalk::direct_walk(const RegisterState& start, const LocalMemory& memory, uint64_t* pcs,
                             size_t limit, StopReason* why, bool exact_first,
                             const Resume& resume) {
  if (!start.has(x86_64::RIP) || !start.has(x86_64::RSP)) {
    if (why) *why = StopReason::MissingRegister;
    return 0;
  }
  const WalkStart w{start.get(x86_64::RIP), start.get(x86_64::RSP), start.get(x86_64::RBP),
                    start.get(x86_64::RBX)};
  return walk(w, start.has(x86_64::RBP), start.has(x86_64::RBX), memory.ranges(), pcs, limit, why,
              exact_first, &start, resume);
}

size_t FastWalk::local(const WalkStart& start, AddressRange stack, uint64_t* pcs, size_t limit,
                       StopReason* why, FrameAddress first) {
  const bool exact_first = is_exact(first);
  const uint64_t lo = stack.begin, hi = stack.end;
  Resume resume;
  if (start.sp - lo < hi - lo && hi <= kFastWalkEnd)
    if (size_t n = quick(FastStart{start.pc, start.sp, start.bp, hi, 0}, pcs, limit, why,
                         exact_first, resume))
      return n;
  return walk_local(start, lo, hi, pcs, limit, why, exact_first, resume);
}

HotRule* FastWalk::fill_first(uint64_t lookup, uint64_t key) {
  HotRule filled;
  return general_.fill_hot(*cache_, lookup, key, filled) ? &cache_->install(filled) : nullptr;
}

size_t FastWalk::walk_local(const WalkStart& start, uint64_t lo, uint64_t hi, uint64_t* pcs,
                            size_t limit, StopReason* why, bool exact_first, const Resume& resume) {
  const DirectRange range{lo, hi, 0};
  return walk(start, true, true, {&range, 1}, pcs, limit, why, exact_first, nullptr, resume);
}

size_t FastWalk::walk(const WalkStart& start, const bool bp_known, const bool bx_known,
                      std::span<const DirectRange> ranges, uint64_t* pcs, size_t limit,
                      StopReason* why, bool exact_first, const RegisterState* first,
                      const Resume& resume) {
  if (limit == 0) {
    if (why) *why = StopReason::DepthLimit;
    return 0;
  }
  StopReason r = StopReason::None;
  // exact: pc is an interrupted instruction, looked up as is.
  WalkRegs regs{start.pc, start.sp, start.bp, start.bx, bp_known, bx_known, exact_first};
  uint64_t* out = pcs;
  uint64_t* const end = pcs + limit;
  *out++ = regs.pc;
  RuleCache* const cache = cache_;
  Bounds b = bounds_for(ranges, regs.sp);
  // Every register of the frame being walked when it is an interrupted one (the first, or one
  // under a signal frame): the general step may need any of them. Copied only after a signal
  // frame; the first frame's are the caller's.
  const RegisterState* interrupted = first && exact_first ? first : nullptr;
  RegisterState after_signal;
  // Where quick() stopped: its last frame's rule was declined or is not cacheable, so the general
  // step takes it first.
  bool try_fast = true;
  if (resume.frames >= 2) {
    out = pcs + resume.frames;
    regs = WalkRegs{out[-1], resume.sp, resume.bp, 0, true, false, false};
    interrupted = nullptr;
    b = bounds_for(ranges, regs.sp);
    try_fast = false;
  }
  // The walk tracks rip, rsp, rbp and rbx from frame to frame (rbx only through general steps),
  // so a frame's rule may need a register the walk no longer knows though a walk tracking every
  // register would (ld.so's lazy-binding trampoline's CFA is rbx-based). The walk then takes the
  // frames again with every register from the last frame whose registers it knew all of
  // (`restart`, frame `restart_at`: the first until a re-walk moves it) through that frame, and
  // goes on from there as before: each frame is taken again at most once.
  RegisterState restart;
  size_t restart_at = 0;
  bool restart_exact = exact_first;
  LocalMemory restart_memory;

  // Invariant at the top: regs.pc is written; regs are this frame's.
  for (;;) {
    HotRule* cur = nullptr;
    if (cache && b.hi && try_fast) {
      const uint64_t key = RuleCache::key(regs.pc, regs.exact);
      cur = cache->find(key);
      HotRule filled;
      if (!cur && general_.fill_hot(*cache, regs.exact ? regs.pc : regs.pc - 1, key, filled))
        cur = &cache->install(filled);
      if (cur && cur->op == HotRule::kEmpty) cur = nullptr;
    }
    if (cur) {
      const uint64_t delta = static_cast<uint64_t>(b.delta);
      const uint64_t bp_in = regs.bp_ok ? regs.bp : kUnknownBp - delta;
      FastState st{cur, regs.sp + delta, bp_in, out};
      GeneralStep& general = general_;
      FastExit exit = fast_walk(*cache, b.hi + delta, delta, st, end,
                                [&general, cache](uint64_t l, uint64_t k, HotRule& h) {
                                  return general.fill_hot(*cache, l, k, h);
                                });
      if (st.out != out) { // frames were walked
        out = st.out;
        regs.pc = out[-1];
        regs.sp = st.hsp - delta;
        regs.exact = false;
        interrupted = nullptr;
        // rbx is not tracked by the fast walk (no cached rule needs it), so the general step
        // does not know it from here on; should it need it, the frames are taken again (above).
        regs.bx_ok = false;
      }
      if (st.bp != bp_in) { // reloaded by a frame that saved it
        regs.bp = st.bp;
        regs.bp_ok = true;
      }
      if (exit == FastExit::End || exit == FastExit::Full) {
        r = exit == FastExit::End ? StopReason::EndOfStack : StopReason::DepthLimit;
        break;
      }
      if (regs.pc == 0) { // no caller: the outermost frame
        --out;
        r = StopReason::EndOfStack;
        break;
      }
    }
    // The general step: signal frames, expressions, other backends, frame pointers, rules the
    // fast walk declined, and the precise reason when the walk must stop.
    try_fast = true;
    r = general_step(regs, ranges, interrupted, after_signal);
    if (r == StopReason::MissingRegister) {
      const size_t missing_at = static_cast<size_t>(out - pcs) - 1; // this frame
      if (missing_at == restart_at) break; // every register it could know, it knew
      if (restart_at == 0) {               // the first re-walk: from the walk's start
        if (first) restart = *first;
        restart.set(x86_64::RIP, start.pc);
        restart.set(x86_64::RSP, start.sp);
        if (bp_known) restart.set(x86_64::RBP, start.bp);
        if (bx_known) restart.set(x86_64::RBX, start.bx);
        for (const DirectRange& d : ranges)
          restart_memory.add(AddressRange{d.begin, d.end}, d.delta);
      }
      // Frames restart_at + 1 .. missing_at + 1 again, with every register.
      const size_t n =
          restart_at + general_frames(restart, restart_memory, restart_exact, pcs + restart_at,
                                      missing_at + 2 - restart_at, limit - restart_at, r);
      if (r != StopReason::None) {
        if (why) *why = r;
        return n;
      }
      restart_at = n - 1;
      out = pcs + n;
      regs = WalkRegs::of(restart, restart_exact);
      if (restart_exact) {
        after_signal = restart;
        interrupted = &after_signal;
      } else {
        interrupted = nullptr;
      }
      b = bounds_for(ranges, regs.sp);
      continue;
    }
    if (r != StopReason::None) break;
    if (out == end) {
      r = StopReason::DepthLimit;
      break;
    }
    *out++ = regs.pc;
    b = bounds_for(ranges, regs.sp); // a signal frame may leave an alternate signal stack
  }
  if (why) *why = r;
  return static_cast<size_t>(out - pcs);
}

StopReason FastWalk::general_step(WalkRegs& w, std::span<const DirectRange> ranges,
                                  const RegisterState*& interrupted, RegisterState& after_signal) {
  RegisterState regs;
  if (w.exact && interrupted) regs = *interrupted;
  regs.set(x86_64::RIP, w.pc);
  regs.set(x86_64::RSP, w.sp);
  if (w.bp_ok)
    regs.set(x86_64::RBP, w.bp);
  else
    regs.clear(x86_64::RBP);
  if (w.bx_ok)
    regs.set(x86_64::RBX, w.bx);
  else
    regs.clear(x86_64::RBX);
  LocalMemory mem;
  for (const DirectRange& d : ranges)
    mem.add(AddressRange{d.begin, d.end}, d.delta);
  FrameInfo info;
  StopReason r = general_.step(regs, mem, w.exact, info, cache_);
  if (r != StopReason::None) return r;
  // The caller of a signal frame was interrupted: its registers all come from the signal context.
  if (info.signal_frame) {
    after_signal = regs;
    interrupted = &after_signal;
  } else {
    interrupted = nullptr;
  }
  w = WalkRegs::of(regs, info.signal_frame);
  return StopReason::None;
}

size_t FastWalk::general_frames(RegisterState& regs, LocalMemory& memory, bool& exact,
                                uint64_t* pcs, size_t frames, size_t limit, StopReason& why) {
  size_t n = 0;
  why = StopReason::None;
  pcs[n++] = regs.get(x86_64::RIP);
  while (n < frames) {
    FrameInfo info;
    why = general_.step(regs, memory, exact, info, nullptr);
    if (why != StopReason::None) break;
    if (n == limit) {
      why = StopReason::DepthLimit;
      break;
    }
    pcs[n++] = regs.get(x86_64::RIP);
    exact = info.signal_frame;
  }
  return n;
}

} // namespace ehelf
