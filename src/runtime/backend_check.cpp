#include "runtime/backend_check.hpp"

#include <fmt/format.h>

#include "dwarf/module_cfi.hpp"
#include "eh_elf/eh_elf_backend.hpp"
#include "eh_elf/eh_elf_cache.hpp"
#include "model/registers.hpp"
#include "runtime/compact_table.hpp"
#include "runtime/row_cache.hpp"
#include "runtime/rule_cache.hpp"

namespace ehelf {
namespace {

// What the fast path recovers: rip, rsp, rbp.
constexpr uint32_t kFastPathRegisters =
    (1u << x86_64::RIP) | (1u << x86_64::RSP) | (1u << x86_64::RBP);

BackendAnswer answer_of(StopReason r) {
  return r == StopReason::None ? BackendAnswer::Unwound : BackendAnswer::Failed;
}

} // namespace

std::vector<BackendCheck> check_runtime_backends(const UnwindTable& table,
                                                 const EhElfObject* compiled) {
  const CompactTable compact(table);
  std::vector<BackendCheck> out;

  BackendUnderTest rules{"compact table", kWalkRegisters, false, {}};
  rules.step = [&compact](uint64_t pc, const TableRange&, RegisterState& regs, MemoryReader& mem,
                          const SyntheticStack&, bool& signal_frame) {
    const UnwindRule& rule = compact.lookup(pc);
    // Beyond the table's 4 GiB the runtime asks the interpreter (GeneralStep::step_with).
    if (rule.kind == UnwindRule::Interpret || !compact.covers(pc))
      return BackendAnswer::NotApplicable;
    if (rule.kind == UnwindRule::NoEntry) return BackendAnswer::Failed;
    signal_frame = rule.signal_frame;
    return answer_of(apply_rule(rule, regs, mem));
  };
  out.push_back(check_backend(table, rules));

  BackendUnderTest hot{"hot form", kWalkRegisters, false, {}};
  hot.step = [&compact](uint64_t pc, const TableRange&, RegisterState& regs, MemoryReader& mem,
                        const SyntheticStack&, bool& signal_frame) {
    const HotRule h = hot_form(compact.lookup(pc));
    if (h.op == HotRule::kEmpty || !compact.covers(pc)) return BackendAnswer::NotApplicable;
    signal_frame = false; // hot forms never stand for signal frames
    if (h.op & HotRule::kEnd) {
      regs.clear(x86_64::RIP);
      return BackendAnswer::Unwound;
    }
    return answer_of(apply_rule(unwind_rule_of(h), regs, mem));
  };
  out.push_back(check_backend(table, hot));

  // The hot form as the local walk's fast path takes it: hot_step itself on the stack's bytes
  // (rip, rsp and rbp: the fast path leaves rbx to the general step, checked just above).
  BackendUnderTest hot_fast{"hot form, fast path", kFastPathRegisters, /*local=*/true, {}};
  hot_fast.step = [&compact](uint64_t pc, const TableRange&, RegisterState& regs, MemoryReader&,
                             const SyntheticStack& stack, bool& signal_frame) {
    const HotRule h = hot_form(compact.lookup(pc));
    const uint64_t rsp = regs.get(x86_64::RSP);
    // (The walk starts its fast path only with rsp inside the stack's bytes.)
    if (h.op == HotRule::kEmpty || !compact.covers(pc) ||
        rsp - stack.lo() >= stack.hi() - stack.lo())
      return BackendAnswer::NotApplicable;
    uint64_t bp = regs.get(x86_64::RBP), cfa = 0, ret = 0;
    signal_frame = false;
    switch (hot_step(h, rsp, bp, cfa, ret, stack.hi(), /*delta=*/0)) {
    case HotStep::Declined:
      return BackendAnswer::NotApplicable; // the general step decides
    case HotStep::End:
      regs.clear(x86_64::RIP);
      return BackendAnswer::Unwound;
    case HotStep::Taken:
      break;
    }
    regs.set(x86_64::RIP, ret);
    regs.set(x86_64::RSP, cfa);
    regs.set(x86_64::RBP, bp);
    return BackendAnswer::Unwound;
  };
  out.push_back(check_backend(table, hot_fast));

  // Where the row is exactly the frame-pointer rule, following rbp must give the row's answer.
  BackendUnderTest frame_pointer{"frame pointer", kWalkRegisters, false, {}};
  frame_pointer.step = [&table](uint64_t, const TableRange& range, RegisterState& regs,
                                MemoryReader& mem, const SyntheticStack&, bool& signal_frame) {
    if (to_unwind_rule(table.row(range.row), table.function(range.function)) != kFramePointerRule)
      return BackendAnswer::NotApplicable;
    signal_frame = false;
    return answer_of(apply_rule(kFramePointerRule, regs, mem));
  };
  out.push_back(check_backend(table, frame_pointer));

  // A cursor step's remembered row (RowCache): the row as kept, evaluated again.
  BackendUnderTest remembered{"remembered row", (1u << x86_64::kGeneralRegs) - 1, false, {}};
  remembered.step = [&table](uint64_t, const TableRange& range, RegisterState& regs,
                             MemoryReader& mem, const SyntheticStack&, bool& signal_frame) {
    const FunctionInfo& fn = table.function(range.function);
    CachedRow row;
    if (!CachedRow::from(table.row(range.row), fn, /*key=*/1, row))
      return BackendAnswer::NotApplicable;
    signal_frame = row.signal_frame;
    return answer_of(apply_cached(row, regs, mem, nullptr));
  };
  out.push_back(check_backend(table, remembered));

  if (compiled)
    for (bool local : {false, true})
      out.push_back(check_backend(table, eh_elf_backend(*compiled, local)));
  return out;
}

Result<std::vector<BackendCheck>> check_file_backends(const std::string& path,
                                                      bool with_cached_eh_elf,
                                                      std::span<const TableCheck> more) {
  LoadOptions lo;
  lo.separate_debug_file = false;
  auto m = load_module_cfi(path, lo);
  if (!m) return std::move(m).error();
  if (!m->has_tables()) return std::vector<BackendCheck>{};
  auto table = build_unwind_table(*m);
  if (!table) return std::move(table).error();
  std::unique_ptr<EhElfObject> compiled;
  if (with_cached_eh_elf)
    if (auto id = m->elf->build_id()) compiled = load_cached_eh_elf(*id, RegisterSet::Minimal);
  std::vector<BackendCheck> out = check_runtime_backends(*table, compiled.get());
  for (const TableCheck& check : more)
    out.push_back(check(*table));
  return out;
}

std::string describe(const BackendCheck& c) {
  std::string out =
      fmt::format("{}: {} checks, {} agree, {} both refuse, {} not handled, "
                  "{} mismatches",
                  c.backend, c.checks, c.agreed, c.both_failed, c.not_applicable, c.mismatch_count);
  for (const std::string& m : c.mismatches)
    out += "\n  " + m;
  return out;
}

} // namespace ehelf
