// Unwinder: steps from one frame's registers to its caller's, choosing per module among the
// compiled eh_elf, the compact table and the interpreter, with a set-associative rule cache in
// front and the hardening a profiler needs (bounded reads, growing CFA, depth cap).
//
// Threads: walks write the rule cache, so an Unwinder serves one thread at a time, except
// backtrace_direct given a RuleCache of the caller's own (one per thread) over a ModuleMap whose
// modules are all loaded (ModuleMap::load_all) and options.allow_loading off.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "model/register_state.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/rule_cache.hpp"

namespace ehelf {

enum class BackendKind { Auto, Compiled, Table, Interpreter };
std::string_view backend_name(BackendKind b);
// The backend a name (backend_name's, as the CLI's --backend takes them) stands for; Auto for
// any other.
BackendKind backend_from_name(std::string_view name);

using SlowSteps = std::array<uint64_t, kNotExpressibleCount>;
// "N steps ran the interpreter: cfa is an expression 12, ..." (None: "compiled code asked 3"),
// or empty when none did.
std::string slow_steps_summary(const SlowSteps& steps);

struct FrameInfo {
  uint64_t pc = 0; // the frame's pc (a return address for frames after the first)
  uint64_t sp = 0;
  const Module* module = nullptr;
  bool signal_frame = false;      // this frame's FDE is a signal trampoline ('S')
  bool via_frame_pointer = false; // the step to the caller followed rbp: the module has no table
  BackendKind backend = BackendKind::Auto; // what unwound this frame
};

// The registers a walk from a frame needs: its pc, rsp, rbp and rbx (the last two may be
// unknown: see backtrace_direct's validity mask).
struct WalkStart {
  uint64_t pc = 0, sp = 0, bp = 0, bx = 0;
};

struct UnwinderOptions {
  BackendKind backend = BackendKind::Auto; // Auto: compiled if cached, else table, else interpreter
  size_t max_depth = 512;
  bool allow_loading = true; // load module data on first use (off in signal handlers)
  bool frame_pointer_fallback = true;
  bool use_cache = true;
  LoadPolicy policy;
};

class Unwinder {
public:
  Unwinder(ModuleMap& map, UnwinderOptions options = {}) : map_(map), options_(options) {}

  // One step: `regs` holds the frame's registers (rip = its pc) and becomes the caller's.
  // `exact_pc`: rip is the address of the interrupted instruction (first frame, or the frame
  // after a signal frame) rather than a return address, so it is looked up as is, not minus 1.
  // On return, `info` describes the frame that was unwound.
  StopReason step(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info);

  // Walks from `regs`, filling up to `max` frames (the first is regs' own frame). Returns the
  // frame count; `why` says why the walk ended. `exact_first`: regs.rip is an interrupted pc
  // (ptrace, perf sample, signal context) rather than a return address (capture_local()).
  size_t backtrace(RegisterState regs, MemoryReader& mem, FrameInfo* out, size_t max,
                   StopReason* why = nullptr, bool exact_first = true);

  // The fast path for profilers: walks a stack readable in this process (the calling thread's,
  // or a copy: see LocalMemory's deltas), writing only pcs. Frames whose rule is in the rule
  // cache cost a few instructions and one dependent load when the cache has seen the call chain
  // before (RuleCache's links); others fill the cache from the compact table or go through
  // step(). `cache`: a rule cache of the caller's own (one per thread when the Unwinder is
  // shared), else the Unwinder's. Returns the frame count; `why` says why the walk ended.
  size_t backtrace_direct(const RegisterState& regs, const LocalMemory& memory, uint64_t* pcs,
                          size_t max, StopReason* why = nullptr, bool exact_first = false,
                          RuleCache* cache = nullptr);
  size_t backtrace_local(const RegisterState& regs, AddressRange stack, uint64_t* pcs, size_t max,
                         StopReason* why = nullptr, bool exact_first = false);
  // The same from the four registers a walk needs (capture_walk_start()), rbp and rbx known.
  size_t backtrace_local(const WalkStart& start, AddressRange stack, uint64_t* pcs, size_t max,
                         StopReason* why = nullptr, bool exact_first = false);

  // Steps that ran the interpreter since this Unwinder was made, by why the row has no
  // UnwindRule (index: NotExpressible; None counts the compiled code's own fallbacks). For
  // `-v` output: says why the slow path ran.
  SlowSteps slow_steps() const {
    SlowSteps out{};
    for (unsigned i = 0; i < kNotExpressibleCount; ++i)
      out[i] = slow_steps_[i].load(std::memory_order_relaxed);
    return out;
  }

  // Drops cached rules (call when the module map changed).
  void clear_cache() { cache_.clear(); }

  ModuleMap& map() { return map_; }
  const UnwinderOptions& options() const { return options_; }

private:
  // Fills `slot` with the hot form of the rule for `lookup` (module found, loaded if allowed);
  // false if it has none. Remembers the module in `cache`: a module among its last two costs
  // a range check and the compact table's search.
  bool fill_hot(RuleCache& cache, uint64_t lookup, uint64_t key, HotRule& slot);
  // fill_hot for a module not remembered: finds it in the map, loads it if allowed.
  bool fill_hot_module(RuleCache& cache, uint64_t lookup, uint64_t key, HotRule& slot);
  static bool fill_from(const ModuleData& data, uint64_t svma, uint64_t key, HotRule& slot);
  // fill_hot for a module without a compact table: its row found on demand (RowLookup).
  static bool fill_found(const ModuleData& data, uint64_t svma, uint64_t key, HotRule& slot);
  // A step through the row found on demand for `svma`: as a compact rule where one expresses it
  // (filling `cache`, if given, under `key`), else evaluated (evaluate_row). `backend` in: the
  // one asked for (Interpreter: always evaluate); out: the one that ran.
  StopReason step_found(const ModuleData& data, uint64_t svma, RegisterState& regs,
                        MemoryReader& mem, bool& signal_frame, BackendKind& backend,
                        RuleCache* cache, uint64_t key);
  static void fill_into(RuleCache& cache, const ModuleData& data, uint64_t svma, uint64_t key);
  StopReason apply_hot(const HotRule& rule, RegisterState& regs, MemoryReader& mem);
  // The walk behind backtrace_direct and backtrace_local: `bp_known`/`bx_known` say whether rbp and
  // rbx are known.
  size_t walk_direct(const WalkStart& start, bool bp_known, bool bx_known,
                     std::span<const DirectRange> ranges, uint64_t* pcs, size_t max,
                     StopReason* why, bool exact_first, RuleCache& cache);
  // Out of backtrace_local's way (it stays small): the first frame's fill, installed (null when
  // the pc has no cacheable rule), and the walk of a local stack by walk_direct.
  __attribute__((noinline)) HotRule* fill_first(RuleCache& cache, uint64_t lookup, uint64_t key);
  __attribute__((noinline)) size_t walk_local(const WalkStart& start, uint64_t lo, uint64_t hi,
                                              uint64_t* pcs, size_t max, StopReason* why,
                                              bool exact_first);
  // A direct walk's registers between frames.
  struct WalkRegs {
    uint64_t pc, sp, bp, bx;
    bool bp_ok, bx_ok;
    bool exact; // pc is an interrupted instruction, looked up as is
  };
  // One step() of a direct walk, out of line: the fast walk's function stays small.
  __attribute__((noinline)) StopReason
  general_step(WalkRegs& regs, std::span<const DirectRange> ranges, RuleCache* cache);
  // The same with step() alone (every register tracked).
  size_t walk_general(RegisterState regs, std::span<const DirectRange> ranges, uint64_t* pcs,
                      size_t limit, StopReason* why, bool exact);
  // step() with the given rule cache (null: none).
  // step() with an explicit cache (null: none); a return address without an entry before it is
  // retried at the address itself.
  StopReason step_with(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info,
                       RuleCache* cache);
  StopReason step_once(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info,
                       RuleCache* cache);
  bool cacheable() const {
    return options_.use_cache &&
           (options_.backend == BackendKind::Table || options_.backend == BackendKind::Auto);
  }

  StopReason interpret(const ModuleData& data, uint64_t svma, RegisterState& regs,
                       MemoryReader& mem, bool& signal_frame);
  StopReason run_compiled(const ModuleData& data, uint64_t svma, RegisterState& regs,
                          MemoryReader& mem, bool& signal_frame, bool& fallback);
  // kFramePointerRule, for a module without tables (NoTable when rbp is unknown).
  StopReason frame_pointer_step(RegisterState& regs, MemoryReader& mem);
  // Counts a step the interpreter took because the row has no UnwindRule.
  void count_slow(NotExpressible why) {
    slow_steps_[unsigned(why)].fetch_add(1, std::memory_order_relaxed);
  }

  ModuleMap& map_;
  UnwinderOptions options_;
  // Steps the interpreter took, by why the row has no UnwindRule (None: the compiled code asked
  // for the interpreter). Relaxed atomics: walks on several threads may count.
  std::atomic<uint64_t> slow_steps_[kNotExpressibleCount] = {};
  RuleCache cache_;
};

} // namespace ehelf
