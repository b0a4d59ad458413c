#include "bpf/bpf_rows.hpp"

#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "model/dw_op.hpp"
#include "model/registers.hpp"

namespace ehelf {

std::string_view bpf_row_kind_name(unsigned kind) {
  // By kind, in bpf_walk.h's order.
  static constexpr std::string_view kNames[] = {"none",   "cfa_rsp", "cfa_rbp", "plt",
                                                "signal", "end",     "stop",    "cfa_rbx"};
  static_assert(std::size(kNames) == kBpfRowKindCount && EHELF_ROW_NONE == 0 &&
                EHELF_ROW_CFA_RSP == 1 && EHELF_ROW_CFA_RBP == 2 && EHELF_ROW_PLT == 3 &&
                EHELF_ROW_SIGNAL == 4 && EHELF_ROW_END == 5 && EHELF_ROW_STOP == 6 &&
                EHELF_ROW_CFA_RBX == 7);
  return kind < std::size(kNames) ? kNames[kind] : "?";
}

namespace {

constexpr uint8_t kBregRsp = uint8_t(OP_breg0) + uint8_t(x86_64::RSP);
constexpr uint8_t kBregRip = uint8_t(OP_breg0) + uint8_t(x86_64::RIP);
constexpr uint8_t kLit3 = OP_lit0 + 3, kLit15 = OP_lit0 + 15;

bool fits32(int64_t v) {
  return v >= INT32_MIN && v <= INT32_MAX;
}
bool fits16(int64_t v) {
  return v >= INT16_MIN && v <= INT16_MAX;
}

ehelf_bpf_row stop_row(NotExpressible why) {
  ehelf_bpf_row r{};
  r.kind = EHELF_ROW_STOP;
  r.cfa_offset = int32_t(why);
  return r;
}

// The threshold K of the PLT expression (DW_OP_litK, or DW_OP_const1u K), or -1.
int64_t plt_threshold(const ExprOp& op) {
  if (op.opcode >= OP_lit0 && op.opcode <= OP_lit31) return op.opcode - OP_lit0;
  if (op.opcode == OP_const1u) return int64_t(op.a);
  return -1;
}

// N when `e` is the PLT stubs' CFA: rsp + N + ((rip & 15) >= K ? 8 : 0) (K out in `threshold`).
bool match_plt(const Expression& e, int64_t& n, int64_t& threshold) {
  const std::vector<ExprOp>& ops = e.ops();
  if (ops.size() != 9) return false;
  const uint8_t tail[] = {kLit15, OP_and, 0, OP_ge, kLit3, OP_shl, OP_plus};
  for (size_t i = 0; i < 7; ++i)
    if (i != 2 && ops[2 + i].opcode != tail[i]) return false;
  if (ops[0].opcode != kBregRsp || ops[1].opcode != kBregRip || ops[1].a != 0) return false;
  n = int64_t(ops[0].a);
  threshold = plt_threshold(ops[4]);
  return threshold >= 0 && fits32(n);
}

// Y when expression `index` is DW_OP_breg7 Y alone (rsp + Y: a slot of the signal frame).
bool rsp_slot(const UnwindTable& table, uint32_t index, int64_t& y) {
  if (index >= table.expression_count()) return false;
  const std::vector<ExprOp>& ops = table.expression(index).ops();
  if (ops.size() != 1 || ops[0].opcode != kBregRsp) return false;
  y = int64_t(ops[0].a);
  return true;
}

// glibc's __restore_rt: CFA = *(rsp + X); rip, rbp and rbx saved at rsp + Y, rsp + Z and
// rsp + B (rbx unchanged without a rule); rsp, if it has a rule, read at rsp + X too (it is the
// CFA).
ehelf_bpf_row encode_signal(const UnwindTable& table, RowView row, const FunctionInfo& fn,
                            const Expression& cfa) {
  const std::vector<ExprOp>& ops = cfa.ops();
  if (!fn.signal_frame || ops.size() != 2 || ops[0].opcode != kBregRsp || ops[1].opcode != OP_deref)
    return stop_row(NotExpressible::CfaIsExpression);
  if (fn.return_column != x86_64::RIP) return stop_row(NotExpressible::ReturnColumnNotRip);
  const int64_t x = int64_t(ops[0].a);
  int64_t y = 0, z = 0, s = 0;
  const RegisterRule* rip = row.rule_for(x86_64::RIP);
  const RegisterRule* rbp = row.rule_for(x86_64::RBP);
  const RegisterRule* rsp = row.rule_for(x86_64::RSP);
  const RegisterRule* rbx = row.rule_for(x86_64::RBX);
  int64_t b = 0;
  if (!rip || rip->kind != RegisterRule::Kind::Expression || !rsp_slot(table, rip->expr, y))
    return stop_row(NotExpressible::ReturnAddressNotSaved);
  if (!rbp || rbp->kind != RegisterRule::Kind::Expression || !rsp_slot(table, rbp->expr, z))
    return stop_row(NotExpressible::RegisterRuleNotOffset);
  if (rbx && (rbx->kind != RegisterRule::Kind::Expression || !rsp_slot(table, rbx->expr, b)))
    return stop_row(NotExpressible::RegisterRuleNotOffset);
  if (rsp &&
      (rsp->kind != RegisterRule::Kind::Expression || !rsp_slot(table, rsp->expr, s) || s != x))
    return stop_row(NotExpressible::RuleForRsp);
  if (!fits32(x) || !fits16(z) || !fits16(y) || !fits16(b))
    return stop_row(NotExpressible::OffsetDoesNotFit);
  ehelf_bpf_row r{};
  r.kind = EHELF_ROW_SIGNAL;
  r.flags = uint8_t(EHELF_ROW_SIGNAL_FRAME | (rbx ? EHELF_SAVE_AT_CFA : EHELF_SAVE_SAME)
                                                 << EHELF_RBX_SHIFT);
  r.cfa_offset = int32_t(x);
  r.rip_offset = int16_t(y);
  r.rbp_offset = int16_t(z);
  r.rbx_offset = int16_t(b);
  return r;
}

// The row of an UnwindRule of kind CfaRsp or CfaRbp (`kind`: the row's, CFA_* or PLT).
ehelf_bpf_row from_rule(const UnwindRule& rule, uint8_t kind) {
  ehelf_bpf_row r{};
  if (rule.rip == UnwindRule::Unknown) {
    r.kind = EHELF_ROW_END;
    return r;
  }
  r.kind = kind;
  r.flags = uint8_t(rule.rbp | (rule.signal_frame ? EHELF_ROW_SIGNAL_FRAME : 0) |
                    rule.rbx << EHELF_RBX_SHIFT);
  r.rip_offset = rule.rip_offset;
  r.cfa_offset = rule.cfa_offset;
  if (rule.rbp == UnwindRule::AtCfa) r.rbp_offset = rule.rbp_offset;
  if (rule.rbx == UnwindRule::AtCfa) r.rbx_offset = rule.rbx_offset;
  return r;
}

} // namespace

ehelf_bpf_row encode_bpf_row(const UnwindTable& table, RowView row, const FunctionInfo& fn) {
  // Only rip, rsp, rbp and rbx are tracked in the kernel: another register's rule must not make
  // the row a STOP. (rule_for answers the first rule of a column: so does this copy.)
  ColumnRule columns[4];
  size_t count = 0;
  for (unsigned reg : {x86_64::RBX, x86_64::RBP, x86_64::RSP, x86_64::RIP})
    if (const RegisterRule* r = row.rule_for(reg)) columns[count++] = ColumnRule{uint16_t(reg), *r};
  RowView walked{row.cfa, std::span<const ColumnRule>(columns, count)};

  if (row.cfa.kind == CfaRule::Kind::Expression && row.cfa.expr < table.expression_count()) {
    const Expression& cfa = table.expression(row.cfa.expr);
    int64_t n = 0, threshold = 0;
    if (!match_plt(cfa, n, threshold)) return encode_signal(table, walked, fn, cfa);
    // The rest of the row as if CFA = rsp + N: the PLT term is added by the step.
    walked.cfa = CfaRule{CfaRule::Kind::RegOffset, x86_64::RSP, n, kNoExpression};
    const UnwindRule rule = to_unwind_rule(walked, fn);
    if (rule.kind == UnwindRule::Interpret) return stop_row(rule.interpret_reason());
    // rbp_offset holds the threshold: a PLT row cannot also read rbp from the stack.
    if (rule.rip != UnwindRule::Unknown && rule.rbp == UnwindRule::AtCfa)
      return stop_row(NotExpressible::RegisterRuleNotOffset);
    ehelf_bpf_row r = from_rule(rule, EHELF_ROW_PLT);
    if (r.kind == EHELF_ROW_PLT) r.rbp_offset = int32_t(threshold);
    return r;
  }
  // CFA = rbx + N: the rest of the row as if CFA = rsp + N, the step taking rbx instead.
  const bool on_rbx = row.cfa.kind == CfaRule::Kind::RegOffset && row.cfa.reg == x86_64::RBX;
  if (on_rbx) walked.cfa.reg = x86_64::RSP;
  const UnwindRule rule = to_unwind_rule(walked, fn);
  if (rule.kind == UnwindRule::Interpret) return stop_row(rule.interpret_reason());
  return from_rule(rule, on_rbx                            ? EHELF_ROW_CFA_RBX
                         : rule.kind == UnwindRule::CfaRsp ? EHELF_ROW_CFA_RSP
                                                           : EHELF_ROW_CFA_RBP);
}

namespace {

// The page index of `t`'s rows (BpfTable::page_index).
void add_page_index(BpfTable& t) {
  const uint64_t span = uint64_t(t.rows.back().pc) + 1; // the last row starts below this
  uint32_t shift = 4;
  while (shift < 31 && (span >> shift) + 1 > t.rows.size())
    ++shift;
  t.page_shift = shift;
  t.page_count = uint32_t(((span - 1) >> shift) + 1);
  std::vector<uint32_t> entries(size_t(t.page_count) + 1);
  size_t below = 0; // rows starting below the page
  for (uint32_t page = 0; page <= t.page_count; ++page) {
    const uint64_t start = uint64_t(page) << shift;
    while (below < t.rows.size() && t.rows[below].pc < start)
      ++below;
    entries[page] = uint32_t(below);
  }
  t.page_index.assign((entries.size() + EHELF_PAGE_ENTRIES - 1) / EHELF_PAGE_ENTRIES,
                      ehelf_bpf_row{});
  static_assert(sizeof(ehelf_bpf_page_entries) == sizeof(ehelf_bpf_row));
  std::memcpy(t.page_index.data(), entries.data(), entries.size() * sizeof(uint32_t));
}

} // namespace

Result<BpfTable> encode_bpf_rows(const UnwindTable& table) {
  BpfTable out;
  const std::span<const TableRange> ranges = table.ranges();
  if (ranges.empty()) return out;
  out.base = ranges.front().begin;
  uint64_t end = out.base; // where the previous range ended
  auto push = [&](uint64_t pc, const ehelf_bpf_row& encoded) {
    ehelf_bpf_row r = encoded;
    r.pc = uint32_t(pc - out.base);
    if (!out.rows.empty()) {
      ehelf_bpf_row last = out.rows.back();
      last.pc = r.pc;
      if (std::memcmp(&last, &r, sizeof r) == 0) return; // the same step: one row covers both
    }
    out.rows.push_back(r);
  };
  const ehelf_bpf_row none{};
  // A row's encoding depends on the function only through its 'S' augmentation and return
  // column: encoded once per distinct row for the usual function (cc1: 478,579 ranges, a few
  // thousand distinct rows), every time for the others.
  std::vector<ehelf_bpf_row> usual(table.row_count());
  std::vector<bool> usual_done(table.row_count());
  for (const TableRange& range : ranges) {
    if (range.begin < end || range.end <= range.begin)
      return Error::plain(fmt::format("unwind ranges not sorted and disjoint at {:#x}..{:#x}",
                                      range.begin, range.end));
    if (range.end - out.base > UINT32_MAX)
      return Error::plain(fmt::format(
          "range {:#x}..{:#x} ends 4 GiB or more above the table's base {:#x}: a BPF row's pc "
          "has 32 bits",
          range.begin, range.end, out.base));
    if (range.function >= table.function_count() || range.row >= table.row_count())
      return Error::plain(
          fmt::format("range {:#x}..{:#x} names no row or function", range.begin, range.end));
    if (range.begin > end) push(end, none);
    const FunctionInfo& fn = table.function(range.function);
    if (fn.signal_frame || fn.return_column != x86_64::RIP) {
      push(range.begin, encode_bpf_row(table, table.row(range.row), fn));
    } else {
      if (!usual_done[range.row]) {
        usual[range.row] = encode_bpf_row(table, table.row(range.row), fn);
        usual_done[range.row] = true;
      }
      push(range.begin, usual[range.row]);
    }
    end = range.end;
  }
  push(end, none);
  add_page_index(out);
  for (const ehelf_bpf_row& r : out.rows) {
    ++out.rows_by_kind[r.kind];
    if (r.kind == EHELF_ROW_STOP && uint32_t(r.cfa_offset) < kNotExpressibleCount)
      ++out.stop_by_reason[size_t(r.cfa_offset)];
  }
  return out;
}

std::string describe(const BpfTable& rows) {
  std::string out = fmt::format("{} rows, {} bytes:", rows.rows.size(), rows.bytes());
  const char* sep = " ";
  for (unsigned k = 0; k < kBpfRowKindCount; ++k) {
    if (!rows.rows_by_kind[k]) continue;
    out += fmt::format("{}{} {}", sep, rows.rows_by_kind[k], bpf_row_kind_name(k));
    sep = ", ";
  }
  sep = "; stop: ";
  for (unsigned why = 0; why < kNotExpressibleCount; ++why) {
    if (!rows.stop_by_reason[why]) continue;
    out += fmt::format("{}{} {}", sep, rows.stop_by_reason[why],
                       not_expressible_name(NotExpressible(why)));
    sep = ", ";
  }
  return out;
}

} // namespace ehelf
