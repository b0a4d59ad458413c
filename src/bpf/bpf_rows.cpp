#include "bpf/bpf_rows.hpp"

#include <limits>

#include "model/dw_op.hpp"
#include "model/registers.hpp"
#include "runtime/unwind_rule.hpp"

namespace ehelf::bpf {
namespace {

bool fits(int64_t v, int64_t lo, int64_t hi) {
  return v >= lo && v <= hi;
}

constexpr uint8_t breg(unsigned reg) {
  return uint8_t(unsigned(OP_breg0) + reg);
}

ehelf_bpf_row stop_row(NotExpressible why) {
  ehelf_bpf_row r{};
  r.kind = EHELF_ROW_STOP;
  r.cfa_offset = int32_t(why);
  return r;
}

// The ops of expression `index`, if it is `breg7 N` (rsp + N) followed by `tail`.
bool rsp_plus(const UnwindTable& t, uint32_t index, std::initializer_list<uint8_t> tail,
              int64_t& n) {
  if (index == kNoExpression || index >= t.expression_count()) return false;
  const auto& ops = t.expression(index).ops();
  if (ops.size() != 1 + tail.size() || ops[0].opcode != breg(x86_64::RSP)) return false;
  size_t i = 1;
  for (uint8_t op : tail)
    if (ops[i++].opcode != op) return false;
  n = int64_t(ops[0].a);
  return true;
}

// The expression every linker writes for PLT entries: rsp + N, plus 8 once rip & 15 reaches K
// (breg7 N; breg16 0; lit15; and; litK; ge; lit3; shl; plus).
bool plt_expression(const UnwindTable& t, uint32_t index, int64_t& n, int64_t& k) {
  if (index == kNoExpression || index >= t.expression_count()) return false;
  const auto& ops = t.expression(index).ops();
  if (ops.size() != 9) return false;
  const uint8_t expected[] = {breg(x86_64::RSP), breg(x86_64::RIP), OP_lit0 + 15, OP_and,
                              0, OP_ge, OP_lit0 + 3, OP_shl, OP_plus};
  for (size_t i = 0; i < 9; ++i)
    if (i != 4 && ops[i].opcode != expected[i]) return false;
  if (ops[4].opcode < OP_lit0 || ops[4].opcode > OP_lit0 + 15 || ops[1].a != 0) return false;
  n = int64_t(ops[0].a);
  k = ops[4].opcode - OP_lit0;
  return true;
}

ehelf_bpf_row row_of(const UnwindTable& t, const TableRange& range) {
  const RowView row = t.row(range.row);
  const FunctionInfo& fn = t.function(range.function);
  if (fn.return_column != x86_64::RIP) return stop_row(NotExpressible::ReturnColumnNotRip);
  ehelf_bpf_row r{};
  if (fn.signal_frame) r.flags |= EHELF_ROW_SIGNAL_FRAME;
  const RegisterRule* rip = row.rule_for(x86_64::RIP);
  const RegisterRule* rbp = row.rule_for(x86_64::RBP);
  if (row.cfa.kind == CfaRule::Kind::Expression) {
    int64_t n = 0, k = 0, y = 0, z = 0;
    // The kernel's rt_sigframe (glibc's __restore_rt): CFA = *(rsp + N), rip and rbp saved at
    // rsp + Y and rsp + Z.
    if (fn.signal_frame && rsp_plus(t, row.cfa.expr, {OP_deref}, n) && rip &&
        rip->kind == RegisterRule::Kind::Expression && rsp_plus(t, rip->expr, {}, y) && rbp &&
        rbp->kind == RegisterRule::Kind::Expression && rsp_plus(t, rbp->expr, {}, z) &&
        fits(n, INT32_MIN, INT32_MAX) && fits(y, INT16_MIN, INT16_MAX) &&
        fits(z, INT32_MIN, INT32_MAX)) {
      r.kind = EHELF_ROW_SIGNAL;
      r.cfa_offset = int32_t(n);
      r.rip_offset = int16_t(y);
      r.rbp_offset = int32_t(z);
      return r;
    }
    if (!plt_expression(t, row.cfa.expr, n, k) || !fits(n, INT32_MIN, INT32_MAX))
      return stop_row(NotExpressible::CfaIsExpression);
    r.kind = EHELF_ROW_PLT;
    r.cfa_offset = int32_t(n);
    r.rbp_offset = int32_t(k);
  } else if (row.cfa.kind == CfaRule::Kind::RegOffset) {
    if (row.cfa.reg == x86_64::RSP)
      r.kind = EHELF_ROW_CFA_RSP;
    else if (row.cfa.reg == x86_64::RBP)
      r.kind = EHELF_ROW_CFA_RBP;
    else
      return stop_row(NotExpressible::CfaRegisterNotRspOrRbp);
    if (!fits(row.cfa.offset, INT32_MIN, INT32_MAX))
      return stop_row(NotExpressible::CfaOffsetDoesNotFit);
    r.cfa_offset = int32_t(row.cfa.offset);
  } else {
    return stop_row(NotExpressible::CfaIsExpression);
  }
  if (row.rule_for(x86_64::RSP)) return stop_row(NotExpressible::RuleForRsp);
  // The return address: saved at CFA + n, or undefined (the outermost frame).
  if (!rip || rip->kind == RegisterRule::Kind::Undefined) {
    ehelf_bpf_row end{};
    end.kind = EHELF_ROW_END;
    end.flags = r.flags;
    return end;
  }
  if (rip->kind == RegisterRule::Kind::SameValue)
    return stop_row(NotExpressible::ReturnAddressNotSaved);
  if (rip->kind != RegisterRule::Kind::Offset) return stop_row(NotExpressible::ReturnAddressNotSaved);
  if (!fits(rip->offset, INT16_MIN, INT16_MAX)) return stop_row(NotExpressible::OffsetDoesNotFit);
  r.rip_offset = int16_t(rip->offset);
  // rbp: unchanged when no rule names it (callee-saved), else saved at CFA + n or unknown.
  if (!rbp || rbp->kind == RegisterRule::Kind::SameValue) {
    r.flags |= EHELF_SAVE_SAME;
  } else if (rbp->kind == RegisterRule::Kind::Undefined) {
    r.flags |= EHELF_SAVE_UNKNOWN;
  } else if (rbp->kind == RegisterRule::Kind::Offset && fits(rbp->offset, INT32_MIN, INT32_MAX)) {
    r.flags |= EHELF_SAVE_AT_CFA;
    r.rbp_offset = int32_t(rbp->offset);
  } else {
    return stop_row(NotExpressible::RegisterRuleNotOffset);
  }
  return r;
}

bool same_row(const ehelf_bpf_row& a, const ehelf_bpf_row& b) {
  return a.kind == b.kind && a.flags == b.flags && a.rip_offset == b.rip_offset &&
         a.cfa_offset == b.cfa_offset && a.rbp_offset == b.rbp_offset;
}

} // namespace

BpfTable encode_bpf_rows(const UnwindTable& table) {
  BpfTable out;
  const auto ranges = table.ranges();
  if (ranges.empty()) return out;
  out.base = ranges.front().begin;
  uint64_t end = out.base; // where the last row written ends
  auto add = [&](uint64_t pc, const ehelf_bpf_row& row) {
    if (!out.rows.empty() && same_row(out.rows.back(), row)) return; // one row holds both
    ehelf_bpf_row r = row;
    r.pc = uint32_t(pc - out.base);
    out.rows.push_back(r);
  };
  for (const TableRange& range : ranges) {
    if (range.end - out.base > std::numeric_limits<uint32_t>::max()) {
      ++out.beyond_4gib;
      continue;
    }
    if (range.begin > end) add(end, ehelf_bpf_row{}); // a gap: NONE
    add(range.begin, row_of(table, range));
    end = range.end;
  }
  add(end, ehelf_bpf_row{});
  for (const ehelf_bpf_row& r : out.rows) {
    if (r.kind < out.kinds.size()) ++out.kinds[r.kind];
    if (r.kind == EHELF_ROW_STOP && uint32_t(r.cfa_offset) < out.not_expressible.size())
      ++out.not_expressible[uint32_t(r.cfa_offset)];
  }
  return out;
}

} // namespace ehelf::bpf
