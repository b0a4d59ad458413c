// CfaRule and RegisterRule: how one row computes the CFA and recovers each register (DWARF 5
// section 6.4.1). Expressions are indices into the owning table's expression pool.
#pragma once

#include <cstdint>
#include <string_view>

namespace ehelf {

constexpr uint32_t kNoExpression = UINT32_MAX;

struct CfaRule {
  enum class Kind : uint8_t {
    RegOffset,  // CFA = reg + offset
    Expression, // CFA = value of expr
    Undefined,  // no CFA rule was ever set (malformed or empty CIE)
  };
  Kind kind = Kind::Undefined;
  uint16_t reg = 0;
  int64_t offset = 0;
  uint32_t expr = kNoExpression;

  bool operator==(const CfaRule&) const = default;
};

struct RegisterRule {
  enum class Kind : uint8_t {
    Undefined,     // the register is not recoverable
    SameValue,     // unchanged from the callee
    Offset,        // saved at CFA + offset
    ValOffset,     // value is CFA + offset
    Register,      // value is in register `reg`
    Expression,    // saved at the address computed by expr (CFA pushed first)
    ValExpression, // value is expr (CFA pushed first)
    Architectural, // defined by the ABI; not produced by any DW_CFA op on x86_64
  };
  Kind kind = Kind::Undefined;
  uint16_t reg = 0;
  int64_t offset = 0;
  uint32_t expr = kNoExpression;

  bool operator==(const RegisterRule&) const = default;
};

constexpr unsigned kRuleKindCount = 8;
std::string_view rule_kind_name(RegisterRule::Kind k);

// A rule for one column. Columns without an entry in a row have no rule (the CIE set none):
// unwinders treat them as "same value" for callee-saved registers.
struct ColumnRule {
  uint16_t column = 0;
  RegisterRule rule;
  bool operator==(const ColumnRule&) const = default;
};

} // namespace ehelf
