#include "synth/compare.hpp"

#include <elf.h>

#include <fmt/format.h>

#include <optional>

#include "model/dw_op.hpp"
#include "model/registers.hpp"
#include "x86/instruction.hpp"

#include "x86/decoder.hpp"

namespace ehelf::synth {

namespace {

struct Column {
  x86::Reg reg;
  uint16_t dwarf;
};
constexpr Column kColumns[] = {{x86::Reg::rbx, 3},  {x86::Reg::rbp, 6},  {x86::Reg::r12, 12},
                               {x86::Reg::r13, 13}, {x86::Reg::r14, 14}, {x86::Reg::r15, 15}};

// `DW_OP_breg<rsp|rbp> k` (then `DW_OP_deref` when `deref`): the base and k, or none.
std::pair<x86::Reg, int64_t> breg_form(const UnwindTable& table, uint32_t expr, bool deref) {
  if (expr >= table.expression_count()) return {x86::Reg::none, 0};
  const auto& ops = table.expression(expr).ops();
  if (ops.size() != (deref ? 2u : 1u) || (deref && ops[1].opcode != OP_deref))
    return {x86::Reg::none, 0};
  if (ops[0].opcode == unsigned(OP_breg0) + x86_64::RBP) return {x86::Reg::rbp, int64_t(ops[0].a)};
  if (ops[0].opcode == unsigned(OP_breg0) + x86_64::RSP) return {x86::Reg::rsp, int64_t(ops[0].a)};
  return {x86::Reg::none, 0};
}

// The offset from the realignment address A of `base + k`, if `base` is known relative to A.
std::optional<int64_t> aligned_offset(const FrameState& s, x86::Reg base, int64_t k) {
  if (base == x86::Reg::rbp && s.rbp_known && s.rbp_aligned) return k - s.rbp_depth;
  if (base == x86::Reg::rsp && s.rsp_known && s.rsp_aligned) return k - s.height;
  return std::nullopt;
}

bool same_cfa(const FrameState& s, const UnwindTable& table, const CfaRule& c) {
  if (c.kind == CfaRule::Kind::Expression) {
    // A DRAP frame's CFA read from the slot the DRAP register was pushed to.
    const auto [base, k] = breg_form(table, c.expr, true);
    const auto at = aligned_offset(s, base, k);
    return s.drap_slot && at && *at == s.drap_slot;
  }
  if (c.kind != CfaRule::Kind::RegOffset) return false;
  if (c.reg == x86_64::RSP) return s.rsp_known && !s.rsp_aligned && c.offset == s.height;
  if (c.reg == x86_64::RBP) return s.rbp_known && !s.rbp_aligned && c.offset == s.rbp_depth;
  return s.drap != x86::Reg::none && dwarf_column(s.drap) == c.reg && c.offset == s.drap_depth;
}

// The first way `row` and `s` differ, or empty.
std::string difference(const FrameState& s, const UnwindTable& table, RowView row, bool outermost) {
  const RegisterRule* ra = row.rule_for(x86_64::RIP);
  // The entry point has no caller: where both say so, the CFA does not matter.
  if (outermost && ra && ra->kind == RegisterRule::Kind::Undefined) return {};
  const CfaRule& c = row.cfa;
  if (!same_cfa(s, table, c)) {
    if (c.kind == CfaRule::Kind::Expression) return "cfa expression";
    if (c.kind == CfaRule::Kind::RegOffset && c.reg != x86_64::RSP && c.reg != x86_64::RBP)
      return "cfa other register";
    return "cfa";
  }
  if (!ra || ra->kind != RegisterRule::Kind::Offset || ra->offset != -8) return "return address";
  for (const Column& col : kColumns) {
    const RegisterRule* r = row.rule_for(col.dwarf);
    const unsigned reg = unsigned(col.reg);
    const int32_t ours = s.saved[reg];
    const bool ours_aligned = s.saved_aligned >> reg & 1;
    const bool restored_aligned = s.restored_aligned >> reg & 1;
    const bool unchanged = !(s.clobbered >> reg & 1);
    const std::string name(x86::reg_name(col.reg));
    if (!r || r->kind == RegisterRule::Kind::SameValue) {
      // Saved but not yet overwritten: the register itself still holds the caller's value.
      if (ours && !unchanged) return name;
    } else if (r->kind == RegisterRule::Kind::Offset) {
      if ((ours != r->offset || ours_aligned) && (s.restored[reg] != r->offset || restored_aligned))
        return name;
    } else if (r->kind == RegisterRule::Kind::Expression) {
      // A save in a realigned frame: the slot's address from rbp or rsp.
      const auto [base, k] = breg_form(table, r->expr, false);
      const auto at = aligned_offset(s, base, k);
      if (at && ((ours && ours_aligned && *at == ours) ||
                 (s.restored[reg] && restored_aligned && *at == s.restored[reg])))
        continue;
      // gcc keeps a DRAP frame's save rules to the end, past the pops that restored the
      // registers and rbp (its base): the shipped rule then reads the wrong slot.
      if (!ours && unchanged && base != x86::Reg::none && !at)
        return name + " save rule kept after restore (shipped)";
      return name + " expression";
    } else
      return name + " rule kind";
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

namespace {

// The instructions in [begin, end) of `elf`'s code other than padding (nop, int3), decoded one
// after the other; none in the PLT sections (their rows are the standard ones, not analysed).
uint64_t instructions_in(const ElfFile& elf, const x86::Decoder& decoder, uint64_t begin,
                         uint64_t end) {
  for (const Section& s : elf.sections()) {
    if (!(s.flags & SHF_EXECINSTR) || begin < s.addr || begin - s.addr >= s.size) continue;
    if (s.name.starts_with(".plt")) return 0;
    auto data = elf.section_data(s);
    if (!data || begin - s.addr >= data->size()) return 0;
    auto code =
        data->subspan(begin - s.addr, std::min(end - begin, data->size() - (begin - s.addr)));
    uint64_t n = 0;
    const uint64_t swept = decoder.sweep(code, begin, [&n](const x86::Instruction& in, uint64_t) {
      n += !in.padding;
      return true;
    });
    return swept < code.size() ? n + 1 : n; // what follows is not code the decoder knows: once
  }
  return 0;
}

} // namespace

Comparison compare_tables(const SynthResult& synthesized, const UnwindTable& shipped,
                          const ElfFile* elf) {
  x86::Decoder decoder;
  Comparison out;
  for (const AnalysedInstruction& in : synthesized.instructions) {
    const TableRange* r = shipped.find(in.address);
    if (!r) {
      ++out.uncovered;
      continue;
    }
    ++out.instructions;
    const FrameState& state = synthesized.state_of(in);
    std::string why = difference(state, shipped, shipped.row(r->row),
                                 synthesized.functions[in.function].outermost);
    if (why.empty()) {
      ++out.agreeing;
      continue;
    }
    ++out.by_category[why];
    out.disagreements.push_back({in.address, in.function, why, describe(state) + " ra@-8",
                                 shipped_row_text(shipped, in.address)});
  }
  // The shipped ranges (sorted, disjoint) less the analysed instructions (sorted by address).
  auto in = synthesized.instructions.begin();
  for (const TableRange& r : shipped.ranges()) {
    out.shipped_bytes += r.end - r.begin;
    uint64_t at = r.begin;
    while (in != synthesized.instructions.end() && in->address + in->length <= at)
      ++in;
    for (auto i = in; i != synthesized.instructions.end() && i->address < r.end; ++i) {
      if (i->address > at) {
        out.missed_bytes += i->address - at;
        if (elf) out.missed_instructions += instructions_in(*elf, decoder, at, i->address);
      }
      at = std::max(at, i->address + i->length);
    }
    if (at < r.end) {
      out.missed_bytes += r.end - at;
      if (elf) out.missed_instructions += instructions_in(*elf, decoder, at, r.end);
    }
  }
  return out;
}

} // namespace ehelf::synth
