// CompactTable: the data-table backend. Rows of the unwind table as 12-byte UnwindRules
// (unwind_rule.hpp: CFA from rsp or rbp, where rip, rbp and rbx were saved), looked up through
// sorted 32-bit range starts (ORC / eBPF-profiler style). Rows no rule expresses are Interpret
// rules (with the reason) and go to the interpreter.
#pragma once

#include <cstdint>
#include <vector>

#include "model/unwind_table.hpp"
#include "runtime/unwind_rule.hpp"

namespace ehelf {

// The lookup half of a CompactTable, without ownership: what a rule-cache fill keeps at hand
// (RuleCache's module memo) so that a miss does not go through the table object.
struct CompactIndex {
  const uint32_t* starts = nullptr;      // range starts, relative to the table's base
  const uint32_t* block_first = nullptr; // per block, the number of ranges starting before it
  const uint16_t* rule_of = nullptr;     // per range, its rule's index
  unsigned block_shift = 8;
  // The rule index of the range holding `off`, an offset from the table's base below its end.
  uint32_t rule_index(uint32_t off) const;
};

class CompactTable {
public:
  // Rule numbers are 16 bits (rule_of_): a module with more distinct rules has the rest answered
  // by the interpreter (rule 1, Interpret), never dropped.
  static constexpr size_t kMaxRules = UINT16_MAX;

  CompactTable() = default;
  explicit CompactTable(const UnwindTable& table);

  // The rule for an SVMA; NoEntry outside the table.
  __attribute__((always_inline)) const UnwindRule& lookup(uint64_t svma) const {
    return rules_[rule_index(svma)];
  }
  // The index of that rule (0: NoEntry), for data kept per rule (RuleCache's hot forms).
  uint32_t rule_index(uint64_t svma) const;
  // SVMAs [base(), end()) are in the table (at most 4 GiB: a module's tables beyond that are
  // not covered, and the interpreter answers there); index() looks up offsets from base().
  bool covers(uint64_t svma) const { return svma - base_ < end_ - base_; }
  uint64_t base() const { return base_; }
  uint64_t end() const { return end_; }
  CompactIndex index() const {
    return CompactIndex{starts_.data(), page_first_.data(), rule_of_.data(), block_shift_};
  }
  const UnwindRule& rule(uint32_t index) const { return rules_[index]; }
  size_t ranges() const { return starts_.size(); }
  size_t rules() const { return rules_.size(); }
  size_t memory_bytes() const {
    return starts_.capacity() * 4 + rule_of_.capacity() * 2 +
           rules_.capacity() * sizeof(UnwindRule) + page_first_.capacity() * 4;
  }

private:
  uint64_t base_ = 0;
  uint64_t end_ = 0;
  std::vector<uint32_t> starts_; // relative to base_
  // For each block of [base_, end_], the number of ranges starting before it: a lookup searches
  // only the ranges that start inside the pc's block (ORC's lookup table). Blocks are 256 bytes
  // (ORC's size), halved down to 32 while there are more than two ranges per block on average,
  // so that densely packed code (many tiny functions) keeps a rule-cache miss cheap; the index
  // then costs at most as much memory as the range starts.
  unsigned block_shift_ = 8;
  std::vector<uint32_t> page_first_;
  std::vector<uint16_t> rule_of_; // index into rules_
  std::vector<UnwindRule> rules_;
};

// Inline, always: the rule cache's fill calls these for every miss, and a step without the cache
// for every frame (left to the compiler, the general step's growth made it call them out of
// line: ~2-4% more instructions per frame).
__attribute__((always_inline)) inline uint32_t CompactIndex::rule_index(uint32_t off) const {
  const uint32_t block = off >> block_shift;
  // Ranges [first, last) start inside the block; the one before `first` covers its first bytes.
  const uint32_t first = block_first[block], last = block_first[block + 1];
  // The last range starting at or below off: a branchless binary search over [first - 1, last)
  // (first - 1 starts before the block, so it qualifies whenever no range of the block does).
  uint32_t lo = first ? first - 1 : 0, n = last - lo;
  while (n > 1) {
    uint32_t half = n / 2;
    lo = starts[lo + half] <= off ? lo + half : lo;
    n -= half;
  }
  return rule_of[lo];
}

__attribute__((always_inline)) inline uint32_t CompactTable::rule_index(uint64_t svma) const {
  if (svma - base_ >= end_ - base_) return 0; // outside [base_, end_), or an empty table
  return index().rule_index(static_cast<uint32_t>(svma - base_));
}

} // namespace ehelf
