#include "synth/compare.hpp"

#include <fmt/format.h>

#include "model/registers.hpp"
#include "x86/instruction.hpp"

namespace ehelf::synth {

namespace {

struct Column {
  x86::Reg reg;
  uint16_t dwarf;
};
constexpr Column kColumns[] = {{x86::Reg::rbx, 3},  {x86::Reg::rbp, 6},  {x86::Reg::r12, 12},
                               {x86::Reg::r13, 13}, {x86::Reg::r14, 14}, {x86::Reg::r15, 15}};

// The first way `row` and `s` differ, or empty.
std::string difference(const FrameState& s, RowView row, bool outermost) {
  const RegisterRule* ra = row.rule_for(x86_64::RIP);
  // The entry point has no caller: where both say so, the CFA does not matter.
  if (outermost && ra && ra->kind == RegisterRule::Kind::Undefined) return {};
  const CfaRule& c = row.cfa;
  bool cfa_ok = false;
  if (c.kind == CfaRule::Kind::RegOffset) {
    if (c.reg == x86_64::RSP)
      cfa_ok = s.rsp_known && c.offset == s.height;
    else if (c.reg == x86_64::RBP)
      cfa_ok = s.rbp_known && c.offset == s.rbp_depth;
  }
  if (!cfa_ok) {
    if (c.kind == CfaRule::Kind::Expression) return "cfa expression";
    if (c.kind == CfaRule::Kind::RegOffset && c.reg != x86_64::RSP && c.reg != x86_64::RBP)
      return "cfa other register";
    return "cfa";
  }
  if (!ra || ra->kind != RegisterRule::Kind::Offset || ra->offset != -8) return "return address";
  for (const Column& col : kColumns) {
    const RegisterRule* r = row.rule_for(col.dwarf);
    const int32_t ours = s.saved[unsigned(col.reg)];
    const bool unchanged = !(s.clobbered >> unsigned(col.reg) & 1);
    if (!r || r->kind == RegisterRule::Kind::SameValue) {
      // Saved but not yet overwritten: the register itself still holds the caller's value.
      if (ours && !unchanged) return std::string(x86::reg_name(col.reg));
    } else if (r->kind == RegisterRule::Kind::Offset) {
      if (ours != r->offset && s.restored[unsigned(col.reg)] != r->offset)
        return std::string(x86::reg_name(col.reg));
    } else
      return std::string(x86::reg_name(col.reg)) + " rule kind";
  }
  return {};
}

} // namespace

std::string shipped_row_text(const UnwindTable& table, uint64_t pc) {
  const TableRange* r = table.find(pc);
  if (!r) return "none";
  const RowView row = table.row(r->row);
  std::string out;
  if (row.cfa.kind == CfaRule::Kind::RegOffset)
    out = fmt::format("CFA={}+{}", x86_64::register_name(row.cfa.reg), row.cfa.offset);
  else
    out = row.cfa.kind == CfaRule::Kind::Expression ? "CFA=exp" : "CFA=undefined";
  for (const ColumnRule& c : row.columns) {
    const std::string name =
        c.column == x86_64::RIP ? "ra" : std::string(x86_64::register_name(c.column));
    switch (c.rule.kind) {
    case RegisterRule::Kind::Offset:
      out += fmt::format(" {}@{}", name, c.rule.offset);
      break;
    case RegisterRule::Kind::SameValue:
      out += fmt::format(" {}=same", name);
      break;
    case RegisterRule::Kind::Undefined:
      out += fmt::format(" {}=undef", name);
      break;
    default:
      out += fmt::format(" {}={}", name, rule_kind_name(c.rule.kind));
      break;
    }
  }
  return out;
}

Comparison compare_tables(const SynthResult& synthesized, const UnwindTable& shipped) {
  Comparison out;
  for (const AnalysedInstruction& in : synthesized.instructions) {
    const TableRange* r = shipped.find(in.address);
    if (!r) {
      ++out.uncovered;
      continue;
    }
    ++out.instructions;
    std::string why =
        difference(in.state, shipped.row(r->row), synthesized.functions[in.function].outermost);
    if (why.empty()) {
      ++out.agreeing;
      continue;
    }
    ++out.by_category[why];
    out.disagreements.push_back({in.address, in.function, why, describe(in.state) + " ra@-8",
                                 shipped_row_text(shipped, in.address)});
  }
  return out;
}

} // namespace ehelf::synth
