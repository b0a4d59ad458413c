// CompactTable: the data-table backend. Rows of the unwind table projected onto what a backtrace
// needs (CFA from rsp or rbp, where rip, rbp and rbx were saved) as 12-byte rules, looked up
// through sorted 32-bit range starts (ORC / eBPF-profiler style). Rows it cannot express are
// marked Interpret and go to the interpreter.
#pragma once

#include <cstdint>
#include <vector>

#include "model/unwind_table.hpp"

namespace ehelf {

struct CompactRule {
  enum Kind : uint8_t {
    NoEntry = 0,  // no FDE covers the address
    CfaRsp = 1,   // CFA = rsp + cfa_offset
    CfaRbp = 2,   // CFA = rbp + cfa_offset
    Interpret = 3 // anything else: evaluate the model row
  };
  // How a register is recovered: kept as is, read at CFA + offset, or unknown.
  enum Save : uint8_t { Same = 0, AtCfa = 1, Unknown = 2 };
  uint8_t kind = NoEntry;
  uint8_t rip : 2 = Unknown;
  uint8_t rbp : 2 = Same;
  uint8_t rbx : 2 = Same;
  uint8_t signal_frame : 1 = 0;
  uint8_t : 1;
  int16_t rip_offset = 0;
  int32_t cfa_offset = 0;
  int16_t rbp_offset = 0;
  int16_t rbx_offset = 0;
  bool operator==(const CompactRule&) const = default;
};
static_assert(sizeof(CompactRule) == 12, "CompactRule layout is part of the table's size budget");

class CompactTable {
public:
  CompactTable() = default;
  explicit CompactTable(const UnwindTable& table);

  // The rule for an SVMA; NoEntry outside the table.
  const CompactRule& lookup(uint64_t svma) const { return rules_[rule_index(svma)]; }
  // The index of that rule (0: NoEntry), for data kept per rule (RuleCache's hot forms).
  uint32_t rule_index(uint64_t svma) const;
  const CompactRule& rule(uint32_t index) const { return rules_[index]; }
  size_t ranges() const { return starts_.size(); }
  size_t rules() const { return rules_.size(); }
  size_t memory_bytes() const {
    return starts_.capacity() * 4 + rule_of_.capacity() * 2 +
           rules_.capacity() * sizeof(CompactRule) + page_first_.capacity() * 4;
  }

private:
  uint64_t base_ = 0;
  uint64_t end_ = 0;
  std::vector<uint32_t> starts_;  // relative to base_
  // For each block of [base_, end_] (kBlockShift: 256 bytes, as ORC's lookup table), the number
  // of ranges starting before it: a lookup searches only the ranges that start inside the pc's
  // block, a handful, so that a rule-cache miss stays cheap (4 bytes per 256 bytes of code).
  static constexpr unsigned kBlockShift = 8;
  std::vector<uint32_t> page_first_;
  std::vector<uint16_t> rule_of_; // index into rules_
  std::vector<CompactRule> rules_;
};

// The compact form of one row, or a rule of kind Interpret.
CompactRule compact_rule(RowView row, const FunctionInfo& fn);

} // namespace ehelf
