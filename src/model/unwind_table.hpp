// UnwindTable: the unwind-table model of one module, the hub every other part shares.
//
// Sorted, non-overlapping address ranges, each pointing to a row in a deduplicated pool (libc has
// ~20k ranges but a few hundred distinct rows). Addresses are SVMAs (as linked in the file).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/expression.hpp"
#include "model/memory_reader.hpp"
#include "model/register_state.hpp"
#include "model/rules.hpp"
#include "support/result.hpp"

namespace ehelf {

// A row: the CFA rule plus a rule for each column that has one (sorted by column).
struct RowView {
  CfaRule cfa;
  std::span<const ColumnRule> columns;
  const RegisterRule* rule_for(unsigned column) const;
};

// The function-level facts of the FDE that produced a range.
struct FunctionInfo {
  uint64_t pc_begin = 0;
  uint64_t pc_end = 0;
  uint64_t fde_offset = 0;  // offset of the FDE in its section
  uint64_t lsda = 0;        // 0 if none
  uint64_t personality = 0; // 0 if none (or not known from the file: see personality_slot)
  // The SVMA of the pointer holding the personality when the CIE encodes it indirectly
  // (DW_EH_PE_indirect, as C++ does through DW.ref.__gxx_personality_v0): the loader relocates
  // that pointer, so a process reads the routine's address there. 0 when direct.
  uint64_t personality_slot = 0;
  uint16_t return_column = x86_64::RIP;
  bool signal_frame = false; // 'S' augmentation: do not subtract 1 from the pc at lookup
  bool from_debug_frame = false;
};

// One step through a row: the CFA and the caller's registers.
struct RowStep {
  uint64_t cfa = 0;
  RegisterState caller;
};

// Evaluates a row's expressions by their index: the table's pool, or the bytes of a row found
// on demand (dwarf/row_lookup.hpp).
struct RowExpressions {
  virtual Result<uint64_t> evaluate(uint32_t expr, const RegisterState& regs, MemoryReader& mem,
                                    std::optional<uint64_t> initial, std::optional<uint64_t> cfa,
                                    const EvalLimits& limits) const = 0;

protected:
  ~RowExpressions() = default;
};

// What a step through `row` gives from the callee's registers `regs` (UnwindTable::evaluate
// says how). The one definition of applying a row, for the table and for rows found on demand.
Result<RowStep> evaluate_row(RowView row, const RowExpressions& expressions,
                             const RegisterState& regs, MemoryReader& mem, uint16_t return_column,
                             bool messages);
// The same, also following where the registers are: `saved` holds the callee's save slots and
// becomes the caller's (a register read from memory is at the address it was read from; one
// without a rule stays where it was; rsp = CFA and any other computed or unknown register is in
// no slot). Null: as above. Unchanged when the step fails.
Result<RowStep> evaluate_row(RowView row, const RowExpressions& expressions,
                             const RegisterState& regs, MemoryReader& mem, uint16_t return_column,
                             bool messages, SaveSlots* saved);

struct TableRange {
  uint64_t begin = 0;
  uint64_t end = 0;      // exclusive
  uint32_t row = 0;      // index into the row pool
  uint32_t function = 0; // index into functions()
  int64_t args_size = 0; // DW_CFA_GNU_args_size in effect
};

class UnwindTable {
public:
  // ---- building (used by dwarf/ and synth/) ----
  uint32_t add_expression(Expression e);
  uint32_t add_function(const FunctionInfo& f);
  // Interns the row (returns the index of an identical existing row if any).
  uint32_t intern_row(const CfaRule& cfa, std::span<const ColumnRule> columns);
  // Appends a range; ranges may come in any order and are sorted by finish().
  void add_range(const TableRange& r) { ranges_.push_back(r); }
  // Sorts the ranges and joins adjacent ones with the same row, function and args_size; where two
  // overlap (duplicate FDEs, .eh_frame vs .debug_frame), the range added first wins and the later
  // one is clipped. Counts overlaps in overlaps().
  void finish();

  // ---- querying ----
  std::span<const TableRange> ranges() const { return ranges_; }
  const TableRange* find(uint64_t pc) const;
  RowView row(uint32_t index) const;
  size_t row_count() const { return rows_.size(); }
  const Expression& expression(uint32_t index) const { return expressions_[index]; }
  size_t expression_count() const { return expressions_.size(); }
  const FunctionInfo& function(uint32_t index) const { return functions_[index]; }
  size_t function_count() const { return functions_.size(); }
  size_t overlaps() const { return overlaps_; }
  // Approximate heap bytes used.
  size_t memory_bytes() const;

  // ---- evaluating ----
  // Applies row `index` to `regs` (the callee's registers at the pc): computes the CFA and the
  // caller's registers. Registers without a rule keep their value (callee-saved convention) except
  // rsp, which becomes the CFA, and rip, which comes from the return-address column's rule.
  // A register whose rule cannot be evaluated (unreadable save slot, failing expression) becomes
  // unknown; only failures for the CFA and the return-address column are fatal.
  using Step = RowStep;
  // `messages` false: errors carry only their kind (Error::quiet) and evaluating never
  // allocates, for unwinding in signal handlers.
  Result<Step> evaluate(uint32_t row_index, const RegisterState& regs, MemoryReader& mem,
                        uint16_t return_column = x86_64::RIP, bool messages = true) const;
  // The same, with `saved` as in evaluate_row.
  Result<Step> evaluate(uint32_t row_index, const RegisterState& regs, MemoryReader& mem,
                        uint16_t return_column, bool messages, SaveSlots* saved) const;

private:
  struct RowRecord {
    CfaRule cfa;
    uint32_t first = 0; // into column_rules_
    uint32_t count = 0;
  };
  std::vector<TableRange> ranges_;
  std::vector<RowRecord> rows_;
  std::vector<ColumnRule> column_rules_;
  std::vector<Expression> expressions_;
  std::vector<FunctionInfo> functions_;
  // Rows interned while building (emptied by finish()): open addressing over a power-of-two
  // array of (hash, row + 1), 0 empty, at most half full. Every range of a table interns its row
  // (cc1: 444,000 ranges, 822 distinct rows), so this is the build's hot loop: a node-based
  // multimap's modulo and pointer chase took a third of the build.
  struct InternSlot {
    uint64_t hash = 0;
    uint32_t row_plus_one = 0;
  };
  std::vector<InternSlot> row_index_;
  std::unordered_multimap<uint64_t, uint32_t> expr_index_;
  size_t overlaps_ = 0;
};

} // namespace ehelf
