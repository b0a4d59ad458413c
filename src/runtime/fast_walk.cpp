// The fast walk: pcs only, through the rule cache's hot forms and their caller links; frames it
// cannot take alone go to the general step (general_step.cpp) one at a time.
#include "runtime/fast_walk.hpp"

#include <algorithm>
#include <cstring>

namespace ehelf {

namespace {

// The fast walk bounds an rsp-based CFA (rsp + at most 32 KiB: hot_form) by the range's end
// alone, which is sound only if that sum cannot wrap around: ranges ending above this are left
// to the general step (no stack is there in practice; a caller's made-up range may be).
constexpr uint64_t kFastWalkEnd = ~uint64_t(0) - (uint64_t(1) << 16);

// The direct range holding `sp`: the walk's bounds, read at address + delta.
struct Bounds {
  uint64_t lo = 0, hi = 0; // hi: exclusive end; 0 when sp is in no range
  int64_t delta = 0;
};

Bounds bounds_for(std::span<const DirectRange> ranges, uint64_t sp) {
  for (const DirectRange& d : ranges)
    if (sp >= d.begin && sp < d.end && d.end - d.begin >= 16 && d.end <= kFastWalkEnd)
      return Bounds{d.begin, d.end, d.delta};
  return {};
}

// The fast walk's state: the current frame's cached rule and registers, the next pc slot.
struct FastState {
  HotRule* cur;
  uint64_t sp;
  uint64_t bp; // 0 when unknown: a CFA computed from it fails the bound
  uint64_t* out;
};

enum class FastExit {
  Miss,     // out[-1] is a pc without a cacheable rule: the general step decides
  Declined, // cur's rule is not kFast or its CFA fails the bound: the general step decides
  Full,     // no room for the caller's pc
  End,      // cur's rule says it is the outermost frame
};

// Follows the cached rules while the links predict the callers: per frame a load of the return
// address, a compare with the predicted entry's pc, and the rbp reload when the frame saved it.
// A small function of its own so that its state stays in registers.
// `fill(lookup, key, slot)` fills a slot on a cache miss (false: the pc has no cacheable rule).
template <typename Fill>
FastExit fast_walk(RuleCache& cache, const Bounds& b, FastState& st, uint64_t* end, Fill&& fill) {
  HotRule* cur = st.cur;
  uint64_t sp = st.sp, bp = st.bp;
  uint64_t* out = st.out;
  const uint64_t lo16 = b.lo + 16, span = b.hi - b.lo - 16, delta = static_cast<uint64_t>(b.delta);
  FastExit why;
  for (;;) {
    const uint8_t op = cur->op;
    if (!(op & HotRule::kFast)) [[unlikely]] {
      why = (op & HotRule::kEnd) ? FastExit::End : FastExit::Declined;
      break;
    }
    uint64_t cfa;
    if (!(op & HotRule::kRbpBased)) {
      // cfa_offset >= 8 (hot_form): the return address is at or above rsp >= lo, and a saved
      // rbp is inside the frame, so the CFA's upper bound is the only one to check.
      cfa = sp + static_cast<uint64_t>(int64_t(cur->cfa_offset));
      if (cfa > b.hi) [[unlikely]] {
        why = FastExit::Declined;
        break;
      }
    } else {
      // CFA in [lo + 16, hi] bounds the return address and the rbp saved at CFA - 16; a CFA
      // from rbp must also grow (no loops).
      cfa = bp + static_cast<uint64_t>(int64_t(cur->cfa_offset));
      if (cfa - lo16 > span || cfa <= sp) [[unlikely]] {
        why = FastExit::Declined;
        break;
      }
    }
    if (op & HotRule::kRbpSaved)
      std::memcpy(&bp, reinterpret_cast<const void*>(cfa + 8 * int64_t(cur->rbp_offset8) + delta),
                  8);
    uint64_t ret;
    std::memcpy(&ret, reinterpret_cast<const void*>(cfa - 8 + delta), 8);
    if (out == end) [[unlikely]] {
      why = FastExit::Full;
      break;
    }
    *out++ = ret;
    sp = cfa;
    // The next rule: by a link, else by the pc's slot (then linked, the older link dropped).
    // An empty entry can match only ret == 0, which the fast path declines (op == 0).
    HotRule* next = &cache.at(cur->next[0]);
    if (next->key != ret) [[unlikely]] {
      next = &cache.at(cur->next[1]);
      if (next->key != ret) {
        next = cache.find(ret);
        if (!next) {
          next = &cache.make_room(ret);
          if (!fill(ret - 1, ret, *next)) {
            why = FastExit::Miss;
            break;
          }
        }
        cur->next[1] = cur->next[0];
        cur->next[0] = cache.offset_of(*next);
      }
    }
    cur = next;
  }
  st = FastState{cur, sp, bp, out};
  return why;
}

} // namespace

size_t FastWalk::direct(const RegisterState& start, const LocalMemory& memory, uint64_t* pcs,
                        size_t limit, StopReason* why, bool exact_first) {
  if (!start.has(x86_64::RIP) || !start.has(x86_64::RSP)) {
    if (why) *why = StopReason::MissingRegister;
    return 0;
  }
  WalkStart w{start.get(x86_64::RIP), start.get(x86_64::RSP), start.get(x86_64::RBP),
              start.get(x86_64::RBX)};
  return walk(w, start.has(x86_64::RBP), start.has(x86_64::RBX), memory.ranges(), pcs, limit, why,
              exact_first, &start);
}

size_t FastWalk::local(const WalkStart& start, AddressRange stack, uint64_t* pcs, size_t limit,
                       StopReason* why, bool exact_first) {
  // A profiler's usual walk (every rule cached or cacheable, to the outermost frame or the
  // limit) in a function with little to set up; anything else is walked again by walk().
  const uint64_t lo = stack.begin, hi = stack.end;
  if (limit > 1 && cache_ && start.sp - lo < hi - lo && hi - lo >= 16 && hi <= kFastWalkEnd) {
    pcs[0] = start.pc;
    const uint64_t key = RuleCache::key(start.pc, exact_first);
    RuleCache& cache = *cache_;
    HotRule* first = cache.find(key);
    if (!first) first = fill_first(exact_first ? start.pc : start.pc - 1, key);
    if (first && first->op != HotRule::kEmpty) {
      FastState st{first, start.sp, start.bp, pcs + 1};
      GeneralStep& general = general_;
      FastExit exit = fast_walk(cache, Bounds{lo, hi, 0}, st, pcs + limit,
                                [&general, &cache](uint64_t l, uint64_t k, HotRule& h) {
                                  return general.fill_hot(cache, l, k, h);
                                });
      StopReason r = StopReason::None;
      if (exit == FastExit::End) { // the usual end: the outermost frame's rule says so
        r = StopReason::EndOfStack;
      } else if (st.out != pcs + 1 && st.out[-1] == 0) { // no caller: the outermost frame
        --st.out;
        r = StopReason::EndOfStack;
      } else if (exit == FastExit::Full) {
        r = StopReason::DepthLimit;
      }
      if (r != StopReason::None) {
        if (why) *why = r;
        return static_cast<size_t>(st.out - pcs);
      }
    }
  }
  return walk_local(start, lo, hi, pcs, limit, why, exact_first);
}

HotRule* FastWalk::fill_first(uint64_t lookup, uint64_t key) {
  HotRule filled;
  return general_.fill_hot(*cache_, lookup, key, filled) ? &cache_->install(filled) : nullptr;
}

size_t FastWalk::walk_local(const WalkStart& start, uint64_t lo, uint64_t hi, uint64_t* pcs,
                            size_t limit, StopReason* why, bool exact_first) {
  const DirectRange range{lo, hi, 0};
  return walk(start, true, true, {&range, 1}, pcs, limit, why, exact_first);
}

size_t FastWalk::walk(const WalkStart& start, const bool bp_known, const bool bx_known,
                      std::span<const DirectRange> ranges, uint64_t* pcs, size_t limit,
                      StopReason* why, bool exact_first, const RegisterState* first) {
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
  bool bx_dropped = false;
  std::optional<RegisterState> interrupted;
  if (first && exact_first) interrupted = *first;

  // Invariant at the top: regs.pc is written; regs are this frame's.
  for (;;) {
    HotRule* cur = nullptr;
    if (cache && b.hi) {
      const uint64_t key = RuleCache::key(regs.pc, regs.exact);
      cur = cache->find(key);
      HotRule filled;
      if (!cur && general_.fill_hot(*cache, regs.exact ? regs.pc : regs.pc - 1, key, filled))
        cur = &cache->install(filled);
      if (cur && cur->op == HotRule::kEmpty) cur = nullptr;
    }
    if (cur) {
      FastState st{cur, regs.sp, regs.bp_ok ? regs.bp : 0, out};
      GeneralStep& general = general_;
      FastExit exit =
          fast_walk(*cache, b, st, end, [&general, cache](uint64_t l, uint64_t k, HotRule& h) {
            return general.fill_hot(*cache, l, k, h);
          });
      if (st.out != out) { // frames were walked
        out = st.out;
        regs.pc = out[-1];
        regs.sp = st.sp;
        regs.exact = false;
        // rbx is not tracked by the fast walk (no cached rule needs it), so the general step
        // does not know it from here on; should it need it, the walk is redone without it.
        regs.bx_ok = false;
        bx_dropped = true;
      }
      if (st.bp != regs.bp) { // reloaded by a frame that saved it
        regs.bp = st.bp;
        regs.bp_ok = true;
      }
      if (exit == FastExit::Full || exit == FastExit::End) {
        r = exit == FastExit::Full ? StopReason::DepthLimit : StopReason::EndOfStack;
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
    r = general_step(regs, ranges, interrupted);
    if (r != StopReason::None) break;
    if (out == end) {
      r = StopReason::DepthLimit;
      break;
    }
    *out++ = regs.pc;
    b = bounds_for(ranges, regs.sp); // a signal frame may leave an alternate signal stack
  }
  if (r == StopReason::MissingRegister && bx_dropped) {
    RegisterState all;
    if (first) all = *first;
    all.set(x86_64::RIP, start.pc);
    all.set(x86_64::RSP, start.sp);
    if (bp_known) all.set(x86_64::RBP, start.bp);
    if (bx_known) all.set(x86_64::RBX, start.bx);
    return walk_general(all, ranges, pcs, limit, why, exact_first);
  }
  if (why) *why = r;
  return static_cast<size_t>(out - pcs);
}

StopReason FastWalk::general_step(WalkRegs& w, std::span<const DirectRange> ranges,
                                  std::optional<RegisterState>& interrupted) {
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
  if (info.signal_frame)
    interrupted = regs;
  else
    interrupted.reset();
  w = WalkRegs{regs.get(x86_64::RIP), regs.get(x86_64::RSP), regs.get(x86_64::RBP),
               regs.get(x86_64::RBX), regs.has(x86_64::RBP), regs.has(x86_64::RBX),
               info.signal_frame};
  return StopReason::None;
}

size_t FastWalk::walk_general(RegisterState regs, std::span<const DirectRange> ranges,
                              uint64_t* pcs, size_t limit, StopReason* why, bool exact) {
  LocalMemory mem;
  for (const DirectRange& d : ranges)
    mem.add(AddressRange{d.begin, d.end}, d.delta);
  size_t n = 0;
  StopReason r = StopReason::None;
  pcs[n++] = regs.get(x86_64::RIP);
  for (;;) {
    FrameInfo info;
    r = general_.step(regs, mem, exact, info, nullptr);
    if (r != StopReason::None) break;
    if (n == limit) {
      r = StopReason::DepthLimit;
      break;
    }
    pcs[n++] = regs.get(x86_64::RIP);
    exact = info.signal_frame;
  }
  if (why) *why = r;
  return n;
}

} // namespace ehelf
