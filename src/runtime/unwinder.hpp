// Unwinder: a GeneralStep (general_step.hpp) and the fast walk over it (fast_walk.hpp) with a
// set-associative rule cache of its own in front, and a depth cap: what `ehelf stack`,
// `ehelf perf` and the benchmarks walk with.
//
// Threads: walks write the rule cache, so an Unwinder serves one thread at a time, except
// backtrace_direct given a RuleCache of the caller's own (one per thread) over a ModuleMap whose
// modules are all loaded (ModuleMap::load_all) and options.allow_loading off. (libehelf-unwind
// shares one GeneralStep between threads and gives each thread's FastWalk its own cache.)
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/register_state.hpp"
#include "runtime/fast_walk.hpp"
#include "runtime/general_step.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/rule_cache.hpp"

namespace ehelf {

struct UnwinderOptions : StepOptions {
  size_t max_depth = 512;
  bool use_cache = true;
};

class Unwinder {
public:
  Unwinder(ModuleMap& map, UnwinderOptions options = {})
      : general_(map, options), options_(options),
        fast_(general_, cacheable() ? &cache_ : nullptr) {}

  // One GeneralStep::step with this Unwinder's rule cache (when its backend caches rules).
  StopReason step(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info) {
    return general_.step(regs, mem, exact_pc, info, cacheable() ? &cache_ : nullptr);
  }

  // Walks from `regs`, filling up to `max` frames (the first is regs' own frame). Returns the
  // frame count; `why` says why the walk ended. `first`: what regs.rip is (an interrupted pc:
  // ptrace, perf sample, signal context; or a return address: capture_local()).
  size_t backtrace(RegisterState regs, MemoryReader& mem, FrameInfo* out, size_t max,
                   StopReason* why, FrameAddress first) {
    return general_.walk(regs, mem, out, limit(max), why, first, cacheable() ? &cache_ : nullptr);
  }

  // The fast walk (FastWalk::direct): pcs only. `cache`: a rule cache of the caller's own (one
  // per thread when the Unwinder is shared), else the Unwinder's.
  size_t backtrace_direct(const RegisterState& regs, const LocalMemory& memory, uint64_t* pcs,
                          size_t max, StopReason* why, FrameAddress first,
                          RuleCache* cache = nullptr) {
    if (cache && cacheable())
      return FastWalk(general_, cache).direct(regs, memory, pcs, limit(max), why, first);
    return fast_.direct(regs, memory, pcs, limit(max), why, first);
  }
  // A perf sample's walk (FastWalk::sample): its registers and the copy of its stack's first
  // bytes, [rsp, rsp + stack.size()) read at stack.data(); the same pcs as backtrace_direct over
  // that one range.
  size_t backtrace_sample(const RegisterState& regs, std::span<const uint8_t> stack, uint64_t* pcs,
                          size_t max, StopReason* why, FrameAddress first) {
    return fast_.sample(regs, stack, pcs, limit(max), why, first);
  }
  size_t backtrace_local(const RegisterState& regs, AddressRange stack, uint64_t* pcs, size_t max,
                         StopReason* why, FrameAddress first) {
    LocalMemory memory(stack);
    return backtrace_direct(regs, memory, pcs, max, why, first);
  }
  // The same from the four registers a walk needs (capture_walk_start()), rbp and rbx known.
  size_t backtrace_local(const WalkStart& start, AddressRange stack, uint64_t* pcs, size_t max,
                         StopReason* why, FrameAddress first) {
    return fast_.local(start, stack, pcs, limit(max), why, first);
  }

  // Steps that ran the interpreter since this Unwinder was made (GeneralStep::slow_steps).
  SlowSteps slow_steps() const { return general_.slow_steps(); }
  // Frames in no module unwound by following rbp (GeneralStep::frames_outside_modules).
  uint64_t frames_outside_modules() const { return general_.frames_outside_modules(); }

  // Drops cached rules (call when the module map changed).
  void clear_cache() { cache_.clear(); }

  ModuleMap& map() { return general_.map(); }
  const UnwinderOptions& options() const { return options_; }

private:
  bool cacheable() const { return options_.use_cache && general_.backend_cacheable(); }
  size_t limit(size_t max) const { return std::min(max, options_.max_depth); }

  GeneralStep general_;
  UnwinderOptions options_;
  RuleCache cache_;
  FastWalk fast_; // over general_ with cache_ (none when the backend's rules are not cached)
};

} // namespace ehelf
