#include "model/unwind_table.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace ehelf {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// A row's hash for interning: two multiply steps per rule (its small fields packed in one word,
// its offset in another).
constexpr uint64_t kHashMultiplier = 0x9e3779b97f4a7c15ULL;
uint64_t hash_step(uint64_t h, uint64_t v) {
  return (h ^ v) * kHashMultiplier;
}
uint64_t hash_row(const CfaRule& cfa, std::span<const ColumnRule> columns) {
  uint64_t h = hash_step(
      hash_step(0, uint64_t(cfa.kind) | uint64_t(cfa.reg) << 8 | uint64_t(cfa.expr) << 32),
      uint64_t(cfa.offset));
  for (const auto& c : columns)
    h = hash_step(hash_step(h, uint64_t(c.rule.kind) | uint64_t(c.rule.reg) << 8 |
                                   uint64_t(c.column) << 24 | uint64_t(c.rule.expr) << 40),
                  uint64_t(c.rule.offset));
  return h ^ (h >> 29);
}

} // namespace

const RegisterRule* RowView::rule_for(unsigned column) const {
  for (const auto& c : columns)
    if (c.column == column) return &c.rule;
  return nullptr;
}

uint32_t UnwindTable::add_expression(Expression e) {
  uint64_t h = 0;
  for (uint8_t b : e.bytes())
    h = mix(h, b);
  auto [lo, hi] = expr_index_.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (expressions_[it->second] == e) return it->second;
  expressions_.push_back(std::move(e));
  auto idx = static_cast<uint32_t>(expressions_.size() - 1);
  expr_index_.emplace(h, idx);
  return idx;
}

uint32_t UnwindTable::add_function(const FunctionInfo& f) {
  functions_.push_back(f);
  return static_cast<uint32_t>(functions_.size() - 1);
}

uint32_t UnwindTable::intern_row(const CfaRule& cfa, std::span<const ColumnRule> columns) {
  const uint64_t h = hash_row(cfa, columns);
  if (row_index_.empty()) row_index_.resize(256);
  size_t mask = row_index_.size() - 1;
  size_t at = size_t(h) & mask;
  for (; row_index_[at].row_plus_one != 0; at = (at + 1) & mask) {
    if (row_index_[at].hash != h) continue;
    const uint32_t index = row_index_[at].row_plus_one - 1;
    const RowRecord& r = rows_[index];
    if (r.cfa == cfa && r.count == columns.size() &&
        std::equal(columns.begin(), columns.end(), column_rules_.begin() + r.first))
      return index;
  }
  RowRecord rec{cfa, static_cast<uint32_t>(column_rules_.size()),
                static_cast<uint32_t>(columns.size())};
  column_rules_.insert(column_rules_.end(), columns.begin(), columns.end());
  rows_.push_back(rec);
  const auto idx = static_cast<uint32_t>(rows_.size() - 1);
  row_index_[at] = {h, idx + 1};
  if (rows_.size() * 2 > row_index_.size()) { // at most half full: rehash into twice the room
    std::vector<InternSlot> old(row_index_.size() * 2);
    old.swap(row_index_);
    mask = row_index_.size() - 1;
    for (const InternSlot& s : old) {
      if (s.row_plus_one == 0) continue;
      size_t to = size_t(s.hash) & mask;
      while (row_index_[to].row_plus_one != 0)
        to = (to + 1) & mask;
      row_index_[to] = s;
    }
  }
  return idx;
}

void UnwindTable::finish() {
  // Stable sort keeps insertion order among equal starts, so "first added wins" holds. Builders
  // usually add ranges in address order, so check before paying for the sort.
  auto by_begin = [](const TableRange& a, const TableRange& b) { return a.begin < b.begin; };
  if (!std::is_sorted(ranges_.begin(), ranges_.end(), by_begin))
    std::stable_sort(ranges_.begin(), ranges_.end(), by_begin);
  std::vector<TableRange> out;
  out.reserve(ranges_.size());
  for (const auto& r : ranges_) {
    if (r.end <= r.begin) continue;
    if (!out.empty() && r.begin == out.back().end && r.row == out.back().row &&
        r.function == out.back().function && r.args_size == out.back().args_size) {
      out.back().end = r.end; // same rules continue: one range
      continue;
    }
    if (!out.empty() && r.begin < out.back().end) {
      ++overlaps_;
      if (r.end <= out.back().end) continue;
      TableRange clipped = r;
      clipped.begin = out.back().end;
      out.push_back(clipped);
      continue;
    }
    out.push_back(r);
  }
  ranges_ = std::move(out);
  ranges_.shrink_to_fit();
  row_index_ = {};
  expr_index_.clear();
}

const TableRange* UnwindTable::find(uint64_t pc) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pc,
                             [](uint64_t p, const TableRange& r) { return p < r.begin; });
  if (it == ranges_.begin()) return nullptr;
  --it;
  return pc < it->end ? &*it : nullptr;
}

RowView UnwindTable::row(uint32_t index) const {
  const RowRecord& r = rows_[index];
  return RowView{r.cfa, std::span<const ColumnRule>(column_rules_.data() + r.first, r.count)};
}

size_t UnwindTable::memory_bytes() const {
  size_t n = ranges_.capacity() * sizeof(TableRange) + rows_.capacity() * sizeof(RowRecord) +
             column_rules_.capacity() * sizeof(ColumnRule) +
             functions_.capacity() * sizeof(FunctionInfo);
  for (const auto& e : expressions_)
    n += sizeof(Expression) + e.bytes().capacity() + e.ops().capacity() * sizeof(ExprOp);
  return n;
}

namespace {
// UnwindTable's expressions, for evaluate_row.
struct Pool final : RowExpressions {
  const std::vector<Expression>& pool;
  explicit Pool(const std::vector<Expression>& p) : pool(p) {}
  Result<uint64_t> evaluate(uint32_t expr, const RegisterState& regs, MemoryReader& mem,
                            std::optional<uint64_t> initial, std::optional<uint64_t> cfa,
                            const EvalLimits& limits) const override {
    return pool[expr].evaluate(regs, mem, initial, cfa, limits);
  }
};
} // namespace

Result<RowStep> UnwindTable::evaluate(uint32_t row_index, const RegisterState& regs,
                                      MemoryReader& mem, uint16_t return_column,
                                      bool messages) const {
  if (row_index >= rows_.size())
    return messages ? Error::plain("row index out of range") : Error::quiet(ErrorKind::Other);
  return evaluate_row(row(row_index), Pool(expressions_), regs, mem, return_column, messages);
}

Result<RowStep> UnwindTable::evaluate(uint32_t row_index, const RegisterState& regs,
                                      MemoryReader& mem, uint16_t return_column, bool messages,
                                      SaveSlots* saved) const {
  if (row_index >= rows_.size())
    return messages ? Error::plain("row index out of range") : Error::quiet(ErrorKind::Other);
  return evaluate_row(row(row_index), Pool(expressions_), regs, mem, return_column, messages,
                      saved);
}

namespace {

// evaluate_row; kTrack: with `saved` (the step without it costs nothing more for them).
// Inlined into both: a call more would copy the row view once more per step.
template <bool kTrack>
inline __attribute__((always_inline)) Result<RowStep>
evaluate_row_impl(RowView row, const RowExpressions& expressions, const RegisterState& regs,
                  MemoryReader& mem, uint16_t return_column, bool messages, SaveSlots* saved) {
  // `describe` builds the message only when messages are wanted (it allocates).
  auto fail = [messages](ErrorKind kind, auto&& describe) {
    return messages ? Error::plain(std::string(describe())).with_kind(kind) : Error::quiet(kind);
  };
  EvalLimits limits;
  limits.messages = messages;
  RowStep step;
  switch (row.cfa.kind) {
  case CfaRule::Kind::RegOffset:
    if (!regs.has(row.cfa.reg))
      return fail(ErrorKind::MissingRegister,
                  [&] { return fmt::format("CFA register r{} is not known", row.cfa.reg); });
    step.cfa = regs.get(row.cfa.reg) + static_cast<uint64_t>(row.cfa.offset);
    break;
  case CfaRule::Kind::Expression: {
    auto v = expressions.evaluate(row.cfa.expr, regs, mem, std::nullopt, std::nullopt, limits);
    if (!v) return std::move(v).error();
    step.cfa = *v;
    break;
  }
  case CfaRule::Kind::Undefined:
    return fail(ErrorKind::Other, [] { return "the row has no CFA rule"; });
  }

  step.caller = regs; // no rule: same value (callee-saved convention)
  // For `saved`: the registers given a rule other than same value, those read from memory, and
  // where.
  [[maybe_unused]] uint32_t ruled = 0, read = 0;
  [[maybe_unused]] uint64_t read_at[x86_64::kGeneralRegs];
  for (const auto& c : row.columns) {
    if (c.column >= x86_64::kGeneralRegs) continue;
    const RegisterRule& r = c.rule;
    uint64_t v = 0;
    if constexpr (kTrack)
      if (r.kind != RegisterRule::Kind::SameValue) ruled |= 1u << c.column;
    switch (r.kind) {
    case RegisterRule::Kind::Undefined:
      step.caller.clear(c.column);
      continue;
    case RegisterRule::Kind::SameValue:
      continue;
    case RegisterRule::Kind::Offset:
      if (!mem.read_u64(step.cfa + static_cast<uint64_t>(r.offset), v)) {
        // Only the return address is essential: another register whose save slot cannot be
        // read becomes unknown, and the walk goes on.
        if (c.column == return_column)
          return fail(ErrorKind::BadRead, [&] {
            return fmt::format("cannot read r{} saved at {:#x}", c.column,
                               step.cfa + static_cast<uint64_t>(r.offset));
          });
        step.caller.clear(c.column);
        continue;
      }
      if constexpr (kTrack) {
        read |= 1u << c.column;
        read_at[c.column] = step.cfa + static_cast<uint64_t>(r.offset);
      }
      break;
    case RegisterRule::Kind::ValOffset:
      v = step.cfa + static_cast<uint64_t>(r.offset);
      break;
    case RegisterRule::Kind::Register:
      if (!regs.has(r.reg)) {
        step.caller.clear(c.column);
        continue;
      }
      v = regs.get(r.reg);
      break;
    case RegisterRule::Kind::Expression:
    case RegisterRule::Kind::ValExpression: {
      auto addr = expressions.evaluate(r.expr, regs, mem, step.cfa, step.cfa, limits);
      if (!addr) {
        if (c.column == return_column) return std::move(addr).error();
        step.caller.clear(c.column); // a register we cannot recover: unknown, not fatal
        continue;
      }
      v = *addr;
      if (r.kind == RegisterRule::Kind::Expression && !mem.read_u64(*addr, v)) {
        if (c.column == return_column)
          return fail(ErrorKind::BadRead, [&] {
            return fmt::format("cannot read r{} saved at {:#x}", c.column, *addr);
          });
        step.caller.clear(c.column);
        continue;
      }
      if constexpr (kTrack)
        if (r.kind == RegisterRule::Kind::Expression) {
          read |= 1u << c.column;
          read_at[c.column] = *addr;
        }
      break;
    }
    case RegisterRule::Kind::Architectural:
      step.caller.clear(c.column);
      continue;
    }
    step.caller.set(c.column, v);
  }
  // The caller's rip is the return address; its rsp is the CFA (x86_64 psABI) unless a rule says
  // otherwise.
  if (return_column != x86_64::RIP) {
    if (step.caller.has(return_column))
      step.caller.set(x86_64::RIP, step.caller.get(return_column));
    else
      step.caller.clear(x86_64::RIP);
  } else if (!row.rule_for(x86_64::RIP)) {
    step.caller.clear(x86_64::RIP);
  }
  if (!row.rule_for(x86_64::RSP)) step.caller.set(x86_64::RSP, step.cfa);
  if constexpr (kTrack) {
    // rsp without a rule is the CFA, a value held nowhere; rip is the return-address column.
    if (!row.rule_for(x86_64::RSP)) ruled |= 1u << x86_64::RSP;
    saved->valid &= ~ruled;
    for (unsigned reg = 0; reg < x86_64::kGeneralRegs; ++reg)
      if ((read >> reg) & 1u) saved->set(reg, read_at[reg]);
    if (return_column != x86_64::RIP) {
      if (return_column < x86_64::kGeneralRegs && saved->has(return_column) &&
          step.caller.has(x86_64::RIP))
        saved->set(x86_64::RIP, saved->address[return_column]);
      else
        saved->clear(x86_64::RIP);
    }
    if (!step.caller.has(x86_64::RIP)) saved->clear(x86_64::RIP);
  }
  return step;
}

} // namespace

Result<RowStep> evaluate_row(RowView row, const RowExpressions& expressions,
                             const RegisterState& regs, MemoryReader& mem, uint16_t return_column,
                             bool messages) {
  return evaluate_row_impl<false>(row, expressions, regs, mem, return_column, messages, nullptr);
}

Result<RowStep> evaluate_row(RowView row, const RowExpressions& expressions,
                             const RegisterState& regs, MemoryReader& mem, uint16_t return_column,
                             bool messages, SaveSlots* saved) {
  if (!saved)
    return evaluate_row_impl<false>(row, expressions, regs, mem, return_column, messages, nullptr);
  return evaluate_row_impl<true>(row, expressions, regs, mem, return_column, messages, saved);
}

} // namespace ehelf
