// Translating a DWARF expression into straight-line C for a compiled row body.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/expression.hpp"

namespace ehelf {

struct CExpression {
  std::string statements; // temporaries and checks, each ending in ';'
  std::string value;      // a C expression of type uint64_t
};

// `slot_of(dwarf_reg)` gives the context slot of a tracked register, or -1. `initial` (the CFA
// for register rules) is pushed first when given; `cfa` serves DW_OP_call_frame_cfa. `temp` names
// the next temporary (incremented as temporaries are made). Returns nullopt when the expression
// uses anything without a straight-line translation (branches, untracked registers, division,
// sized dereferences...): the body then answers "needs interpreter".
//
// What the generated checks do when a register is unknown or a read fails.
enum class OnFailure : uint8_t {
  FailStep,   // NEED(slot), READ(addr, var): the step fails (the CFA, the return address)
  BreakBlock, // NEED_OR_BREAK, READ_OR_BREAK: leave the block computing one other register,
              // which becomes unknown (as the interpreter treats a failing rule)
};

// The generated code uses the macros of the generated file: NEED(slot) checks a register is
// known, R(slot) reads it, READ(addr, var) reads memory or returns EHELF_BAD_READ (or their
// _OR_BREAK forms, see OnFailure).
std::optional<CExpression> translate_expression(const Expression& e, int (*slot_of)(unsigned),
                                                const char* initial, const char* cfa, int& temp,
                                                OnFailure on_failure = OnFailure::FailStep);

} // namespace ehelf
