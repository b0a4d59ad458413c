#include "runtime/general_step.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "eh_elf/register_slots.hpp"

namespace ehelf {

std::string_view backend_name(BackendKind b) {
  switch (b) {
  case BackendKind::Auto:
    return "auto";
  case BackendKind::Compiled:
    return "compiled";
  case BackendKind::Table:
    return "table";
  case BackendKind::Interpreter:
    return "interp";
  }
  return "?";
}

BackendKind backend_from_name(std::string_view name) {
  for (BackendKind b : {BackendKind::Compiled, BackendKind::Table, BackendKind::Interpreter})
    if (name == backend_name(b)) return b;
  return BackendKind::Auto;
}

std::string slow_steps_summary(const SlowSteps& steps) {
  uint64_t total = 0;
  std::string parts;
  for (unsigned i = 0; i < kNotExpressibleCount; ++i) {
    if (!steps[i]) continue;
    total += steps[i];
    const auto why = NotExpressible(i);
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ",
                         why == NotExpressible::None ? std::string_view("compiled code asked")
                                                     : not_expressible_name(why),
                         steps[i]);
  }
  if (!total) return {};
  return fmt::format("{} step{} ran the interpreter: {}", total, total == 1 ? "" : "s", parts);
}

namespace {
StopReason stop_reason_of(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::BadRead:
    return StopReason::BadRead;
  case ErrorKind::MissingRegister:
    return StopReason::MissingRegister;
  case ErrorKind::Other:
    break;
  }
  return StopReason::RuleFailed;
}
} // namespace

inline __attribute__((always_inline)) bool
GeneralStep::fill_from_compact_table(const ModuleData& data, uint64_t svma, uint64_t key,
                                     HotRule& slot) {
  const HotRule* hot = data.hot.data(); // null: no compact table
  if (!hot) return false;
  HotRule h = hot[data.compact.rule_index(svma)];
  if (h.op == HotRule::kEmpty) return false;
  h.key = key;
  slot = h;
  return true;
}

void GeneralStep::install_from_compact_table(RuleCache& cache, const ModuleData& data,
                                             uint64_t svma, uint64_t key) {
  HotRule h;
  if (fill_from_compact_table(data, svma, key, h)) cache.install(h);
}

bool GeneralStep::fill_from_found_row(const ModuleData& data, uint64_t svma, uint64_t key,
                                      HotRule& slot) {
  FoundRow row;
  const RowLookup* rows = data.row_lookup();
  if (!rows || rows->find(svma, row) != RowStatus::Found) return false;
  HotRule h = hot_form(to_unwind_rule(row.view(), row.function));
  if (h.op == HotRule::kEmpty) return false;
  h.key = key;
  slot = h;
  return true;
}

__attribute__((noinline)) bool GeneralStep::fill_hot(RuleCache& cache, uint64_t lookup,
                                                     uint64_t key, HotRule& slot) {
  const ModuleRules* m = cache.recent_module(lookup, map_.generation());
  // A module not among the last two: a tail call, so this common path saves no registers.
  if (!m) [[unlikely]]
    return fill_hot_from_module_map(cache, lookup, key, slot);
  HotRule h = m->rule(lookup);
  if (h.op == HotRule::kEmpty) return false;
  h.key = key;
  slot = h;
  return true;
}

__attribute__((noinline)) bool GeneralStep::fill_hot_from_module_map(RuleCache& cache,
                                                                     uint64_t lookup, uint64_t key,
                                                                     HotRule& slot) {
  const Module* mod = map_.find(lookup);
  if (!mod) return false;
  const ModuleData* data = mod->data.get();
  if (!data) {
    if (!options_.allow_loading) return false;
    data = &map_.load(*mod, options_.policy);
  }
  if (data->hot.empty()) return fill_from_found_row(*data, lookup - mod->bias, key, slot);
  // Where the module's code and its table overlap (a table may claim more than the module).
  const uint64_t table_lo = mod->bias + data->compact.base();
  const uint64_t lo = std::max(mod->start, table_lo);
  const uint64_t hi = std::min(mod->end, mod->bias + data->compact.end());
  if (lookup < lo || lookup >= hi) return false; // no FDE can cover it
  ModuleRules m{lo, hi - lo, table_lo, data->compact.index(), data->hot.data()};
  cache.remember_module(m, map_.generation());
  HotRule h = m.rule(lookup);
  if (h.op == HotRule::kEmpty) return false;
  h.key = key;
  slot = h;
  return true;
}

template <typename Slots>
StopReason GeneralStep::evaluate_found(const FoundRow& row, RegisterState& regs, MemoryReader& mem,
                                       Slots saved) {
  const FoundRow::Expressions expressions(row);
  const uint16_t rc = row.function.return_column;
  auto step = [&] {
    if constexpr (kEveryRegister<Slots>)
      return evaluate_row(row.view(), expressions, regs, mem, rc, /*messages=*/false, saved);
    else
      return evaluate_row(row.view(), expressions, regs, mem, rc, /*messages=*/false);
  }();
  if (!step) return stop_reason_of(step.error().kind);
  regs = step->caller;
  return StopReason::None;
}

template <typename Slots>
StopReason GeneralStep::step_found(const ModuleData& data, uint64_t svma, RegisterState& regs,
                                   MemoryReader& mem, bool& signal_frame, BackendKind& backend,
                                   RuleCache* cache, uint64_t key, Slots saved,
                                   RowCache* kept_rows) {
  // (A row kept in `kept_rows` was taken by step_with before the module search.)
  FoundRow row;
  const RowLookup* rows = data.row_lookup();
  if (!rows) return StopReason::NoTable;
  switch (rows->find(svma, row)) {
  case RowStatus::Found:
    break;
  case RowStatus::NoEntry:
    return StopReason::NoTable;
  case RowStatus::Malformed:
  case RowStatus::TooComplex:
    return StopReason::RuleFailed;
  }
  signal_frame = row.function.signal_frame;
  if (backend != BackendKind::Interpreter) {
    const UnwindRule rule = to_unwind_rule(row.view(), row.function);
    if (rule.kind == UnwindRule::CfaRsp || rule.kind == UnwindRule::CfaRbp) {
      backend = BackendKind::Table;
      if (cache)
        if (HotRule h = hot_form(rule); h.op != HotRule::kEmpty) {
          h.key = key;
          cache->install(h);
        }
      return apply_rule(rule, regs, mem);
    }
  }
  if (backend != BackendKind::Interpreter)
    count_slow(to_unwind_rule(row.view(), row.function).interpret_reason());
  else if (kept_rows && key)
    if (CachedRow remembered; CachedRow::from(row.view(), row.function, key, remembered))
      kept_rows->install(remembered);
  backend = BackendKind::Interpreter;
  return evaluate_found(row, regs, mem, saved);
}

StopReason GeneralStep::apply_hot(const HotRule& h, RegisterState& regs, MemoryReader& mem) {
  if (h.op & HotRule::kEnd) {
    regs.clear(x86_64::RIP);
    return StopReason::None; // step() reports the end of the stack
  }
  return apply_rule(unwind_rule_of(h), regs, mem);
}

template <typename Slots>
StopReason GeneralStep::interpret(const ModuleData& data, uint64_t svma, RegisterState& regs,
                                  MemoryReader& mem, bool& signal_frame, Slots saved) {
  const TableRange* r = data.table->find(svma);
  if (!r) return StopReason::NoTable;
  const FunctionInfo& fn = data.table->function(r->function);
  signal_frame = fn.signal_frame;
  // Without messages: evaluating never allocates, also when it fails (signal handlers).
  auto step = [&] {
    if constexpr (kEveryRegister<Slots>)
      return data.table->evaluate(r->row, regs, mem, fn.return_column, /*messages=*/false, saved);
    else
      return data.table->evaluate(r->row, regs, mem, fn.return_column, /*messages=*/false);
  }();
  if (!step) return stop_reason_of(step.error().kind);
  regs = step->caller;
  return StopReason::None;
}

namespace {
int deref_through(uint64_t addr, uint64_t* value, void* arg) {
  return static_cast<MemoryReader*>(arg)->read_u64(addr, *value) ? 0 : 1;
}
} // namespace

StopReason GeneralStep::run_compiled(const ModuleData& data, uint64_t svma, RegisterState& regs,
                                     MemoryReader& mem, bool& signal_frame, bool& fallback) {
  const RegisterSet set = register_set_of(data.compiled->info());
  ehelf_context_t ctx = to_context(regs, set);
  int rc = data.compiled->unwind_remote(svma, &ctx, deref_through, &mem);
  switch (rc) {
  case EHELF_OK:
    break;
  case EHELF_NEEDS_INTERPRETER:
    fallback = true;
    return StopReason::None;
  case EHELF_NO_ENTRY:
    return StopReason::NoTable;
  case EHELF_BAD_READ:
    return StopReason::BadRead;
  case EHELF_MISSING_REGISTER:
    return StopReason::MissingRegister;
  default:
    return StopReason::RuleFailed;
  }
  signal_frame = (ctx.flags & EHELF_FLAG_SIGNAL_FRAME) != 0;
  from_context(ctx, set, regs);
  return StopReason::None;
}

template <typename Slots>
StopReason GeneralStep::frame_pointer_step(RegisterState& regs, MemoryReader& mem, Slots saved) {
  if (!regs.has(x86_64::RBP)) return StopReason::NoTable;
  const StopReason r = apply_rule(kFramePointerRule, regs, mem);
  if constexpr (kEveryRegister<Slots>) {
    if (!saved || r != StopReason::None) return r;
    // kFramePointerRule: the return address at CFA - 8, the caller's rbp at CFA - 16.
    const uint64_t cfa = regs.get(x86_64::RSP);
    saved->clear(x86_64::RSP);
    saved->set(x86_64::RIP, cfa - 8);
    if (regs.has(x86_64::RBP))
      saved->set(x86_64::RBP, cfa - 16);
    else
      saved->clear(x86_64::RBP);
  }
  return r;
}

template <typename Slots>
StopReason GeneralStep::choose_and_apply(RegisterState& regs, MemoryReader& mem, bool exact_pc,
                                         FrameInfo& info, RuleCache* cache, Slots saved,
                                         RowCache* rows, bool& signal_frame) {
  const uint64_t pc = regs.get(x86_64::RIP);
  info = FrameInfo{};
  info.pc = pc;
  info.sp = regs.get(x86_64::RSP);
  const uint64_t lookup = exact_pc ? pc : pc - 1;

  // A row this thread evaluated before at this pc (every-register steps through rows found on
  // demand keep them): taken before the module search, as the rule cache's hit below is.
  if (rows)
    if (const CachedRow* remembered = rows->find(RuleCache::key(pc, exact_pc))) {
      info.backend = BackendKind::Interpreter;
      signal_frame = remembered->signal_frame;
      if constexpr (kEveryRegister<Slots>)
        return apply_cached(*remembered, regs, mem, saved);
      else
        return apply_cached(*remembered, regs, mem, nullptr);
    }
  const HotRule* hot = nullptr;
  if (cache)
    if (const HotRule* slot = cache->find(RuleCache::key(pc, exact_pc));
        slot && slot->op != HotRule::kEmpty)
      hot = slot;
  // (One call of the module search here: with two, the compiler stopped inlining it into the
  // step, ~17 instructions more a frame.)
  const Module* mod = map_.find(lookup);
  info.module = mod;
  if (hot) {
    info.backend = BackendKind::Table;
    return apply_hot(*hot, regs, mem);
  }
  if (!mod) {
    // Code in no module: JIT code (V8, the JVM, LuaJIT keep frame pointers there), or not code
    // at all. rbp is followed, as eu-stack and perf's frame-pointer walk do; the caller's frame
    // must be above this one (checked below), so the chain goes up the stack and ends.
    // Without rbp, or where following it fails, the walk ends here as at the outermost frame.
    if (!options_.frame_pointer_fallback) return StopReason::NoModule;
    RegisterState caller = regs;
    if (frame_pointer_step(caller, mem, NoSlots{}) != StopReason::None ||
        !caller.has(x86_64::RIP) || caller.get(x86_64::RIP) == 0)
      return StopReason::NoModule;
    info.via_frame_pointer = true;
    return frame_pointer_step(regs, mem, saved);
  }
  const ModuleData* data = mod->data.get();
  if (!data) {
    if (!options_.allow_loading) return StopReason::NoTable;
    data = &map_.load(*mod, options_.policy);
  }
  if (!data->has_table() && !data->has_rows()) {
    if (!options_.frame_pointer_fallback) return StopReason::NoTable;
    info.via_frame_pointer = true;
    return frame_pointer_step(regs, mem, saved);
  }
  const uint64_t svma = lookup - mod->bias;
  const uint64_t key = RuleCache::key(pc, exact_pc);
  // (Read here, past the cache hit: that path stays as short as before.)
  BackendKind b = kEveryRegister<Slots> ? BackendKind::Interpreter : options_.backend;
  if (b == BackendKind::Auto) b = data->compiled ? BackendKind::Compiled : BackendKind::Table;
  if (b == BackendKind::Compiled && !data->compiled) b = BackendKind::Table;
  info.backend = b;
  if (b == BackendKind::Compiled) {
    bool fallback = false;
    StopReason r = run_compiled(*data, svma, regs, mem, signal_frame, fallback);
    if (fallback) {
      info.backend = BackendKind::Interpreter;
      count_slow(NotExpressible::None);
      if (data->has_table()) {
        r = interpret(*data, svma, regs, mem, signal_frame, saved);
      } else {
        BackendKind evaluated = BackendKind::Interpreter;
        r = step_found(*data, svma, regs, mem, signal_frame, evaluated, nullptr, 0, saved);
      }
    }
    // The cache sits in front of every backend: later visits of this pc take the compact
    // rule (same table, same answer) without calling into the eh_elf.
    if (cache && r == StopReason::None) {
      HotRule h;
      if (!data->hot.empty())
        install_from_compact_table(*cache, *data, svma, key);
      else if (fill_from_found_row(*data, svma, key, h))
        cache->install(h);
    }
    return r;
  }
  if (!data->has_table()) // rows found on demand (Table or Interpreter)
    return step_found(*data, svma, regs, mem, signal_frame, info.backend, cache, key, saved, rows);
  if (b != BackendKind::Table) return interpret(*data, svma, regs, mem, signal_frame, saved);
  const UnwindRule& rule = data->compact.lookup(svma);
  if (rule.kind == UnwindRule::NoEntry) {
    // The compact table may not have been built (LoadPolicy.compact off), or may end before
    // the module's tables (beyond 4 GiB): ask the model.
    if (data->compact.ranges() != 0 && data->compact.covers(svma)) return StopReason::NoTable;
    info.backend = BackendKind::Interpreter;
    return interpret(*data, svma, regs, mem, signal_frame, saved);
  }
  if (rule.kind == UnwindRule::Interpret) {
    info.backend = BackendKind::Interpreter;
    count_slow(rule.interpret_reason());
    return interpret(*data, svma, regs, mem, signal_frame, saved);
  }
  if (cache) install_from_compact_table(*cache, *data, svma, key);
  signal_frame = rule.signal_frame;
  return apply_rule(rule, regs, mem);
}

// A module with tables that have no entry for the pc: code built without them (crt's
// __do_global_dtors_aux and frame_dummy, a sanitizer runtime's, hand-written assembly). rbp is
// followed, as libunwind, elfutils and gdb do, when it leads to a return address in a known
// module; otherwise the walk stops here as before. (Modules without any table take the
// frame-pointer step in choose_and_apply; modules not loaded are not guessed at.)
template <typename Slots>
StopReason GeneralStep::frame_pointer_fallback(RegisterState& regs, MemoryReader& mem,
                                               FrameInfo& info, Slots saved) {
  if (!options_.frame_pointer_fallback || !info.module || !info.module->data ||
      (!info.module->data->has_table() && !info.module->data->has_rows()))
    return StopReason::NoTable;
  RegisterState caller = regs;
  if (frame_pointer_step(caller, mem, NoSlots{}) != StopReason::None || !caller.has(x86_64::RIP) ||
      !map_.find(caller.get(x86_64::RIP) - 1))
    return StopReason::NoTable;
  info.via_frame_pointer = true;
  info.backend = BackendKind::Auto;
  return frame_pointer_step(regs, mem, saved);
}

StopReason GeneralStep::check_caller(const RegisterState& regs, uint64_t sp, bool interrupted,
                                     bool signal_frame, const FrameInfo& info) {
  if (!regs.has(x86_64::RIP) || regs.get(x86_64::RIP) == 0) return StopReason::EndOfStack;
  if (!regs.has(x86_64::RSP)) return StopReason::MissingRegister;
  // The stack grows down, so callers' frames are above: a walk that does not move up is looping
  // (signal frames may switch stacks, e.g. from an alternate signal stack, and are exempt). An
  // interrupted frame may have pushed nothing: its return address still in a register (CFA =
  // rsp + 0, as at libgcc's `jmp *%rcx`), so its caller's rsp may equal its own. No loop comes of
  // it: only the first frame and those under signal frames are interrupted ones.
  const uint64_t caller_sp = regs.get(x86_64::RSP);
  if (!signal_frame && (caller_sp < sp || (caller_sp == sp && !interrupted)))
    return StopReason::CfaNotGrowing;
  if (info.via_frame_pointer && !info.module) [[unlikely]]
    frames_outside_modules_.fetch_add(1, std::memory_order_relaxed);
  return StopReason::None;
}

template <typename Slots>
StopReason GeneralStep::step_with(RegisterState& regs, MemoryReader& mem, bool exact_pc,
                                  FrameInfo& info, RuleCache* cache, Slots saved, RowCache* rows) {
  if (!regs.has(x86_64::RIP)) return StopReason::EndOfStack;
  if (!regs.has(x86_64::RSP)) return StopReason::MissingRegister;
  const uint64_t sp = regs.get(x86_64::RSP);
  bool signal_frame = false;
  StopReason r = choose_and_apply(regs, mem, exact_pc, info, cache, saved, rows, signal_frame);
  // A return address with no unwind entry before it, but one at the address itself: a function
  // "returned" to at its entry (makecontext makes __start_context the return address of a
  // coroutine's first function). Unwound from its entry, as gdb does. (NoTable is decided before
  // any rule runs: `regs` are still the frame's own.)
  if (r == StopReason::NoTable && !exact_pc) [[unlikely]] {
    signal_frame = false;
    r = choose_and_apply(regs, mem, true, info, cache, saved, rows, signal_frame);
  }
  if (r == StopReason::NoTable) [[unlikely]]
    r = frame_pointer_fallback(regs, mem, info, saved);
  info.signal_frame = signal_frame;
  if (r != StopReason::None) return r;
  return check_caller(regs, sp, exact_pc, signal_frame, info);
}

size_t GeneralStep::walk(RegisterState regs, MemoryReader& mem, FrameInfo* out, size_t limit,
                         StopReason* why, FrameAddress first, RuleCache* cache) {
  size_t n = 0;
  bool exact = is_exact(first);
  StopReason r = StopReason::None;
  while (n < limit) {
    FrameInfo info;
    r = step_with(regs, mem, exact, info, cache, NoSlots{});
    if (info.pc || r == StopReason::None) out[n++] = info;
    if (r != StopReason::None) break;
    exact = info.signal_frame; // after a signal frame the pc is the interrupted instruction
  }
  if (n == limit && r == StopReason::None) r = StopReason::DepthLimit;
  if (why) *why = r;
  return n;
}

template StopReason GeneralStep::step_with(RegisterState&, MemoryReader&, bool, FrameInfo&,
                                           RuleCache*, NoSlots, RowCache*);
template StopReason GeneralStep::step_with(RegisterState&, MemoryReader&, bool, FrameInfo&,
                                           RuleCache*, SaveSlots*, RowCache*);

} // namespace ehelf
