// GeneralStep: one step from a frame's registers to its caller's, choosing per module among the
// compiled eh_elf, the compact table and the interpreter (rows found on demand or a whole
// table), with the frame-pointer fallback for modules without tables, the retry at the pc for a
// function "returned" to at its entry (makecontext), and the hardening a profiler needs (bounded
// reads, growing CFA). It fills rule caches given to it but holds none, so one GeneralStep over
// a loaded map (ModuleMap::load_all, or rows found in memory) with loading off serves many
// threads at once. The fast walk (fast_walk.hpp) runs over it; Unwinder (unwinder.hpp) pairs the
// two with a rule cache of its own.
#pragma once

#include "runtime/frame_address.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "model/register_state.hpp"
#include "runtime/backend_kind.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/row_cache.hpp"
#include "runtime/rule_cache.hpp"

namespace ehelf {

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
  bool signal_frame = false; // this frame's FDE is a signal trampoline ('S')
  // The step to the caller followed rbp: no table for the pc (module null: the pc is in no
  // module, e.g. JIT code).
  bool via_frame_pointer = false;
  BackendKind backend = BackendKind::Auto; // what unwound this frame
};

struct StepOptions {
  BackendKind backend = BackendKind::Auto; // Auto: compiled if cached, else table, else interpreter
  bool allow_loading = true;               // load module data on first use (off in signal handlers)
  bool frame_pointer_fallback = true;
  LoadPolicy policy;
};

class GeneralStep {
public:
  GeneralStep(ModuleMap& map, StepOptions options = {}) : map_(map), options_(options) {}

  // One step: `regs` holds the frame's registers (rip = its pc) and becomes the caller's.
  // `exact_pc`: rip is the address of the interrupted instruction (first frame, or the frame
  // after a signal frame) rather than a return address, so it is looked up as is, not minus 1.
  // On return, `info` describes the frame that was unwound. `cache`: rules found are installed
  // there and taken from there (null: none; the caller decides whether its backend caches).
  StopReason step(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info,
                  RuleCache* cache) {
    return step_with(regs, mem, exact_pc, info, cache, NoSlots{});
  }

  // The same with every register's rule evaluated (the interpreter, whatever the backend), so
  // that callers' callee-saved registers (r12-r15 too) are known, as a libunwind cursor gives
  // them; no rule cache. `saved`, if given: the frame's save slots (where its registers' values
  // are in memory) in, the caller's out (evaluate_row says how). `rows`, if given: rows found
  // on demand are remembered there and taken from there (the caller's; never shared between
  // threads).
  StopReason step_every_register(RegisterState& regs, MemoryReader& mem, bool exact_pc,
                                 FrameInfo& info, SaveSlots* saved = nullptr,
                                 RowCache* rows = nullptr) {
    return step_with(regs, mem, exact_pc, info, nullptr, saved, rows);
  }

  // The general walk: steps from `regs` (cache as in step()), filling up to `limit` frames (the
  // first is regs' own frame). Returns the frame count; `why` says why the walk ended.
  // `first`: what regs.rip is (an interrupted pc, or a return address).
  size_t walk(RegisterState regs, MemoryReader& mem, FrameInfo* out, size_t limit, StopReason* why,
              FrameAddress first, RuleCache* cache);

  // Fills `slot` with the hot form of the rule for `lookup` (module found, loaded if allowed);
  // false if it has none. Remembers the module in `cache`: a module among its last two costs
  // a range check and the compact table's search. (The fast walk's cache misses.)
  bool fill_hot(RuleCache& cache, uint64_t lookup, uint64_t key, HotRule& slot);

  // Whether this configuration's rules may be cached (the rule cache holds compact-table rules).
  bool backend_cacheable() const {
    return options_.backend == BackendKind::Table || options_.backend == BackendKind::Auto;
  }

  // Steps that ran the interpreter since this GeneralStep was made, by why the row has no
  // UnwindRule (index: NotExpressible; None counts the compiled code's own fallbacks). For
  // `-v` output: says why the slow path ran.
  SlowSteps slow_steps() const {
    SlowSteps out{};
    for (unsigned i = 0; i < kNotExpressibleCount; ++i)
      out[i] = slow_steps_[i].load(std::memory_order_relaxed);
    return out;
  }

  // Frames in code outside every module (JIT code) that were unwound by following rbp.
  uint64_t frames_outside_modules() const {
    return frames_outside_modules_.load(std::memory_order_relaxed);
  }

  ModuleMap& map() { return map_; }
  const ModuleMap& map() const { return map_; }
  const StepOptions& options() const { return options_; }

private:
  // What a step tracks besides the registers: nothing (NoSlots: step(), the configured backend;
  // an empty argument, which takes no register), or where they were read from (SaveSlots*:
  // step_every_register(), the interpreter).
  struct NoSlots {};
  template <typename Slots>
  static constexpr bool kEveryRegister = std::is_same_v<Slots, SaveSlots*>;

  // The step of step() and step_every_register(), in phases: choose the backend and apply the
  // row (choose_and_apply); a return address without an unwind entry before it retried at the
  // address itself (makecontext); the frame-pointer fallback for code without an entry in a
  // module with tables; the caller checked (check_caller).
  template <typename Slots>
  StopReason step_with(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info,
                       RuleCache* cache, Slots saved, RowCache* rows = nullptr);
  // The row for the frame's pc, from the first of: the rows this thread remembered, the rule
  // cache, the module's backend (compiled, compact table, rows found on demand, interpreter);
  // applied to `regs`. Code in no module, or in one without tables, is unwound by rbp. Fills
  // `info` (reset first) and `signal_frame`. NoTable: no entry (regs unchanged).
  // (Inlined into step_with, as the single function it was: a call here cost the eh throw's
  // steps 5% of their instructions.)
  template <typename Slots>
  [[gnu::always_inline]] inline StopReason
  choose_and_apply(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info,
                   RuleCache* cache, Slots saved, RowCache* rows, bool& signal_frame);
  // A frame without an entry in a module with tables: rbp followed when it leads into a known
  // module (NoTable otherwise).
  template <typename Slots>
  StopReason frame_pointer_fallback(RegisterState& regs, MemoryReader& mem, FrameInfo& info,
                                    Slots saved);
  // The caller a step gave (`regs`), from a frame whose rsp was `sp`: EndOfStack without a pc,
  // CfaNotGrowing when it is not above the frame (but after a signal frame, or an interrupted
  // frame's rsp + 0).
  [[gnu::always_inline]] inline StopReason check_caller(const RegisterState& regs, uint64_t sp,
                                                        bool interrupted, bool signal_frame,
                                                        const FrameInfo& info);
  // fill_hot for a module not remembered: finds it in the map, loads it if allowed.
  bool fill_hot_from_module_map(RuleCache& cache, uint64_t lookup, uint64_t key, HotRule& slot);
  // The hot form of the compact table's rule for `svma`, keyed `key` (false: none there).
  static bool fill_from_compact_table(const ModuleData& data, uint64_t svma, uint64_t key,
                                      HotRule& slot);
  // fill_hot for a module without a compact table: its row found on demand (RowLookup).
  static bool fill_from_found_row(const ModuleData& data, uint64_t svma, uint64_t key,
                                  HotRule& slot);
  // A step through the row found on demand for `svma`: as a compact rule where one expresses it
  // (filling `cache`, if given, under `key`), else evaluated (evaluate_row). `backend` in: the
  // one asked for (Interpreter: always evaluate); out: the one that ran. `kept_rows`: evaluated
  // rows remembered under `key` (see RowCache).
  template <typename Slots>
  StopReason step_found(const ModuleData& data, uint64_t svma, RegisterState& regs,
                        MemoryReader& mem, bool& signal_frame, BackendKind& backend,
                        RuleCache* cache, uint64_t key, Slots saved, RowCache* kept_rows = nullptr);
  // evaluate_row through a row found on demand.
  template <typename Slots>
  static StopReason evaluate_found(const FoundRow& row, RegisterState& regs, MemoryReader& mem,
                                   Slots saved);

  // fill_from_compact_table straight into `cache`.
  static void install_from_compact_table(RuleCache& cache, const ModuleData& data, uint64_t svma,
                                         uint64_t key);
  StopReason apply_hot(const HotRule& rule, RegisterState& regs, MemoryReader& mem);
  template <typename Slots>
  StopReason interpret(const ModuleData& data, uint64_t svma, RegisterState& regs,
                       MemoryReader& mem, bool& signal_frame, Slots saved);
  StopReason run_compiled(const ModuleData& data, uint64_t svma, RegisterState& regs,
                          MemoryReader& mem, bool& signal_frame, bool& fallback);
  // kFramePointerRule, for a module without tables (NoTable when rbp is unknown).
  template <typename Slots>
  StopReason frame_pointer_step(RegisterState& regs, MemoryReader& mem, Slots saved);
  // Counts a step the interpreter took because the row has no UnwindRule.
  void count_slow(NotExpressible why) {
    slow_steps_[unsigned(why)].fetch_add(1, std::memory_order_relaxed);
  }

  ModuleMap& map_;
  StepOptions options_;
  // Steps the interpreter took, by why the row has no UnwindRule (None: the compiled code asked
  // for the interpreter). Relaxed atomics: walks on several threads may count.
  std::atomic<uint64_t> slow_steps_[kNotExpressibleCount] = {};
  std::atomic<uint64_t> frames_outside_modules_ = 0;
};

} // namespace ehelf
