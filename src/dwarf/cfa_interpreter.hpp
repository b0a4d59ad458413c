// CfaInterpreter: runs a CIE's initial instructions and an FDE's program, producing the rows of
// the FDE (DWARF 5 section 6.4.2) in model form: what each instruction means is
// apply_cfa_instruction's (cfa_program.hpp), shared with RowLookup; this keeps the rules in
// growable storage (any column up to kMaxCfaColumn).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "dwarf/cfa_instruction.hpp"
#include "dwarf/cfi_section.hpp"
#include "model/unwind_table.hpp"
#include "support/result.hpp"

namespace ehelf {

// The rules in force at one location.
struct CfaState {
  CfaRule cfa;
  std::vector<ColumnRule> columns; // sorted by column
  int64_t args_size = 0;

  const RegisterRule* rule_for(unsigned column) const;
  void set(unsigned column, const RegisterRule& rule);
  void erase(unsigned column);
};

struct InterpretedRow {
  uint64_t begin = 0;
  uint64_t end = 0;
  const CfaState* state = nullptr;
};

class CfaInterpreter {
public:
  // Expressions met in the programs are decoded and interned into `table`.
  explicit CfaInterpreter(UnwindTable& table) : table_(table) {}

  static constexpr unsigned kMaxStateStack = 64; // remember_state depth

  // Calls `emit` for each row with a non-empty address range, in address order. Programs are
  // decoded as they run (memory does not grow with their length); one of more than
  // cfi_limits::kMaxInstructionsPerProgram instructions or kMaxRowsPerFde rows is refused.
  Status run(const CfiSection& section, const Cie& cie, const Fde& fde, const PointerBases& bases,
             const std::function<void(const InterpretedRow&)>& emit);

private:
  Status execute(const CfiSection& section, const Cie& cie, const Fde* fde,
                 const PointerBases& bases, uint64_t& loc, uint64_t end,
                 const std::function<void(const InterpretedRow&)>* emit);
  Result<uint32_t> intern_expression(const CfiSection& section, const CfaInstruction& in);

  UnwindTable& table_;
  CfaState state_;
  CfaState initial_;
  std::vector<CfaState> stack_;
  // Decoded expressions by their bytes' address: each distinct expression is decoded once.
  std::unordered_map<const uint8_t*, uint32_t> expression_cache_;
  const Cie* cached_cie_ = nullptr;
};

} // namespace ehelf
