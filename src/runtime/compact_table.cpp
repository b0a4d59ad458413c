#include "runtime/compact_table.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>

namespace ehelf {
CompactTable::CompactTable(const UnwindTable& table) {
  auto ranges = table.ranges();
  if (ranges.empty()) return;
  base_ = ranges.front().begin;
  end_ = ranges.back().end;
  if (end_ - base_ > UINT32_MAX) end_ = base_ + UINT32_MAX; // modules above 4 GiB: truncated
  std::unordered_map<uint64_t, uint16_t> index;             // (row, function flags) -> rule
  rules_.push_back(UnwindRule{});                           // 0: NoEntry
  const UnwindRule interpret = UnwindRule::interpret(NotExpressible::TooManyRules, false);
  rules_.push_back(interpret); // 1: the rule of rows beyond kMaxRules (the interpreter answers)
  // Rules by their 12 bytes, so that interning a module's rules costs one lookup each.
  struct RuleHash {
    size_t operator()(const UnwindRule& r) const {
      uint64_t w[2] = {};
      std::memcpy(w, &r, sizeof r);
      return std::hash<uint64_t>{}(w[0] * 0x9e3779b97f4a7c15ULL ^ w[1]);
    }
  };
  std::unordered_map<UnwindRule, uint16_t, RuleHash> interned{{rules_[0], 0}, {interpret, 1}};
  auto intern = [&](const UnwindRule& r) -> uint16_t {
    if (auto it = interned.find(r); it != interned.end()) return it->second;
    // Beyond 16-bit rule numbers (a pathological module): the interpreter, never "no entry".
    if (rules_.size() >= kMaxRules) return 1;
    rules_.push_back(r);
    const auto i = static_cast<uint16_t>(rules_.size() - 1);
    interned.emplace(r, i);
    return i;
  };
  uint64_t prev_end = base_;
  for (TableRange r : ranges) {
    if (r.begin >= end_) break;
    r.end = std::min(r.end, end_); // a range crossing the 4 GiB limit is cut there
    const FunctionInfo& fn = table.function(r.function);
    uint64_t key = (uint64_t(r.row) << 20) | (uint64_t(fn.return_column) << 1) | fn.signal_frame;
    uint16_t rule;
    if (auto it = index.find(key); it != index.end())
      rule = it->second;
    else {
      rule = intern(to_unwind_rule(table.row(r.row), fn));
      index.emplace(key, rule);
    }
    if (r.begin > prev_end) {
      starts_.push_back(static_cast<uint32_t>(prev_end - base_));
      rule_of_.push_back(0);
    }
    if (rule_of_.empty() || rule_of_.back() != rule || r.begin > prev_end) {
      starts_.push_back(static_cast<uint32_t>(r.begin - base_));
      rule_of_.push_back(rule);
    }
    prev_end = r.end;
  }
  if (starts_.empty()) { // nothing below the limit: an empty table
    end_ = base_;
    return;
  }
  while (block_shift_ > 5 && starts_.size() > 2 * (((end_ - base_) >> block_shift_) + 1))
    --block_shift_;
  uint64_t pages = ((end_ - base_) >> block_shift_) + 2;
  page_first_.reserve(pages);
  size_t ri = 0;
  for (uint64_t p = 0; p < pages; ++p) {
    uint64_t at = p << block_shift_;
    while (ri < starts_.size() && starts_[ri] < at)
      ++ri;
    page_first_.push_back(static_cast<uint32_t>(ri));
  }
  starts_.shrink_to_fit();
  rule_of_.shrink_to_fit();
  rules_.shrink_to_fit();
}

} // namespace ehelf
