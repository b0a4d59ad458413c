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
