// check::RowCheck: the comparison of a row with a shadow frame, and the run's tally.
#include "check/row_check.hpp"

#include <fmt/format.h>
#include <optional>

#include "model/registers.hpp"
#include "report/table_json.hpp"

namespace ehelf::check {
namespace {

constexpr unsigned kRa = x86_64::RIP;
constexpr uint32_t kAllGeneral = (uint32_t(1) << x86_64::kGeneralRegs) - 1;

std::string reg_text(unsigned dwarf) {
  std::string_view n = x86_64::register_name(dwarf);
  return n.empty() ? fmt::format("r{}", dwarf) : std::string(n);
}

std::string offset_text(int64_t v) {
  return fmt::format("{:+d}", v);
}

} // namespace

std::string row_text(RowView row) {
  std::string out = "CFA=" + cfa_rule_text(row.cfa);
  for (const ColumnRule& c : row.columns)
    out += fmt::format(" {}={}", c.column == kRa ? "ra" : reg_text(c.column),
                       register_rule_text(c.rule));
  return out;
}

bool describes_jump_target(const RegisterRule* ra) {
  return ra && (ra->kind == RegisterRule::Kind::Register ||
                (ra->kind == RegisterRule::Kind::Offset && ra->offset >= 0));
}

void RowCheck::report(const Site& site, RowView row, std::string column, std::string expected,
                      std::string table) {
  uint64_t svma = site.pc - site.module->bias;
  if (!reported_.emplace(site.module->path, svma, column).second) return;
  Inconsistency r;
  r.module = site.module->path;
  r.address = svma;
  r.function = names_.function(site);
  r.instruction = names_.instruction(site);
  r.row = row_text(row);
  r.column = std::move(column);
  r.expected = std::move(expected);
  r.table = std::move(table);
  r.tid = site.tid;
  result_.inconsistencies.push_back(std::move(r));
}

void RowCheck::check(const Site& site, const RegisterState& regs, const ShadowFrame& f,
                     MemoryReader& memory, const bool* state_unknown) {
  const uint64_t pc = site.pc;
  const UnwindTable& table = *site.data->table;
  ++result_.summary.checked;
  checked_pcs_.insert(pc);
  modules_.insert(site.data);
  if (!site.range) {
    // No table covers the code (crt files' functions, hand-written code without CFI): nothing
    // to compare; listed apart, since unwinders know they have no row there.
    ++result_.summary.no_row;
    std::string name = names_.function(site);
    if (size_t plus = name.find('+'); plus != std::string::npos) name.resize(plus);
    uncovered_.emplace(site.module->path, name.empty() ? "?" : name);
    return;
  }
  functions_.emplace(site.data, site.range->function);
  RowView row = table.row(site.range->row);
  const RegisterRule* ra = row.rule_for(kRa);
  if (describes_jump_target(ra)) {
    ++result_.summary.jump_rows;
    return;
  }
  // A rule that could not be evaluated for want of a register or a memory word the state does
  // not hold (a replayed trace's) says nothing about the table.
  bool undetermined = false;
  auto unknown_state = [&] {
    const bool unknown =
        (state_unknown && *state_unknown) || (regs.valid & kAllGeneral) != kAllGeneral;
    undetermined |= unknown;
    return unknown;
  };
  const uint64_t expected_cfa = f.slot + 8;
  uint64_t cfa = 0;
  std::optional<RowStep> evaluated; // the whole row, for the rules that need memory
  auto evaluate = [&]() -> const RowStep* {
    if (!evaluated) {
      auto s = table.evaluate(site.range->row, regs, memory,
                              table.function(site.range->function).return_column, false);
      if (!s) return nullptr;
      evaluated = std::move(*s);
    }
    return &*evaluated;
  };
  auto finish_site = [&] {
    if (undetermined) ++result_.summary.undetermined;
  };
  // The CFA.
  if (row.cfa.kind == CfaRule::Kind::RegOffset && regs.has(row.cfa.reg)) {
    cfa = regs.get(row.cfa.reg) + uint64_t(row.cfa.offset);
    if (cfa != expected_cfa) {
      int64_t want = int64_t(expected_cfa - regs.get(row.cfa.reg));
      report(site, row, "CFA", reg_text(row.cfa.reg) + offset_text(want), cfa_rule_text(row.cfa));
      return;
    }
  } else {
    const RowStep* s = evaluate();
    if (!s && unknown_state()) return finish_site();
    if (!s || s->cfa != expected_cfa) {
      report(site, row, "CFA",
             fmt::format("{:#x} (rsp{})", expected_cfa,
                         offset_text(int64_t(expected_cfa - regs.get(x86_64::RSP)))),
             s ? fmt::format("{} = {:#x}", cfa_rule_text(row.cfa), s->cfa)
               : cfa_rule_text(row.cfa) + " (cannot be evaluated)");
      return;
    }
    cfa = s->cfa;
  }
  // The return address: at CFA-8.
  if (!ra || ra->kind != RegisterRule::Kind::Offset || ra->offset != -8) {
    const bool evaluable = ra && ra->kind != RegisterRule::Kind::Undefined;
    const RowStep* s = evaluable ? evaluate() : nullptr;
    const bool known = s && s->caller.has(x86_64::RIP);
    if (!known && evaluable && unknown_state()) {
      // undetermined: what the rule reads was not recorded
    } else if (!known || s->caller.get(x86_64::RIP) != f.return_address) {
      report(site, row, "ra", "c-8", ra ? register_rule_text(*ra) : "none");
    }
  }
  // The callee-saved registers.
  for (unsigned i = 0; i < kCalleeSaved.size(); ++i) {
    const unsigned reg = kCalleeSaved[i];
    const RegisterRule* rule = row.rule_for(reg);
    std::string where = f.save_count[i]
                            ? "c" + offset_text(int64_t(f.saves[i][f.save_count[i] - 1] - cfa))
                            : std::string("s");
    if (!rule || rule->kind == RegisterRule::Kind::SameValue) {
      // Saved and changed since, but the row says it is still in the register.
      if (!regs.has(reg)) {
        undetermined |= f.save_count[i] != 0;
        continue;
      }
      if (regs.get(reg) != f.entry[i] && f.save_count[i])
        report(site, row, reg_text(reg), where, rule ? "s" : "none");
      continue;
    }
    if (rule->kind == RegisterRule::Kind::Offset) {
      if (!f.saved_at(i, cfa + uint64_t(rule->offset)))
        report(site, row, reg_text(reg), where, register_rule_text(*rule));
      continue;
    }
    if (rule->kind == RegisterRule::Kind::Undefined) continue; // says nothing
    const RowStep* s = evaluate();
    const bool known = s && s->caller.has(reg);
    if (!known && unknown_state()) continue;
    if (!known || s->caller.get(reg) != f.entry[i])
      report(site, row, reg_text(reg), fmt::format("{:#x}", f.entry[i]),
             known ? fmt::format("{} = {:#x}", register_rule_text(*rule), s->caller.get(reg))
                   : register_rule_text(*rule) + " (cannot be evaluated)");
  }
  finish_site();
}

CheckResult RowCheck::finish() {
  CheckSummary& s = result_.summary;
  s.distinct_addresses = checked_pcs_.size();
  s.functions = functions_.size();
  s.modules = modules_.size();
  for (const auto& [module, function] : uncovered_)
    result_.uncovered.push_back(module + ": " + function);
  return std::move(result_);
}

} // namespace ehelf::check
