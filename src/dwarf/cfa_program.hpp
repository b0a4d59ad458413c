// What each DW_CFA_* instruction does to the rules in force (DWARF 5 section 6.4.2), written once
// for the two interpreters, which differ only in where the rules live:
//   - CfaInterpreter (cfa_interpreter.cpp): growable state (any column up to kMaxColumn, 64-bit
//     offsets, a remember stack of 64, expressions decoded into the table), every row emitted,
//     errors as messages naming the section offset;
//   - RowLookup (row_lookup.cpp): fixed state on the stack (the registers the runtime tracks,
//     32-bit offsets, 4 remembered states, expressions as spans), the program run only up to the
//     row of one address, no allocation (a signal handler's lookup), faults as a RowStatus.
// Each keeps its own decode loop (the first decodes with messages, the second quietly) and calls
// apply_cfa_instruction for what an instruction means; its `Rules` says how the meaning is stored.
#pragma once

#include <cstdint>

#include "dwarf/cfa_instruction.hpp"
#include "dwarf/constants.hpp"
#include "model/rules.hpp"

namespace ehelf {

// Why an instruction could not be applied. The first group is malformed input, said the same way
// by both interpreters; the rest come from a storage.
enum class CfaFault : uint8_t {
  None,
  LocationOverflows, // an advance wraps around the address space
  LocationBackwards, // DW_CFA_set_loc below the current location
  RegisterTooLarge,  // a register number above kMaxCfaColumn (reg, or reg2 of DW_CFA_register)
  NothingRemembered, // DW_CFA_restore_state without a remember_state
  CfaIsExpression,   // DW_CFA_def_cfa_offset while the CFA is an expression
  Unhandled,         // an opcode DWARF does not define for x86_64
  // From the storage:
  RememberedTooDeep, // more remember_states than it holds
  TooManyRows,       // more rows in one FDE than cfi_limits allows
  BadExpression,     // an expression it could not decode (growable storage: keeps the message)
  BeyondStorage,     // a value it cannot hold (fixed storage: an offset over 32 bits)
  Stopped,           // it has what it wanted (fixed storage: the target's row); not an error
};

inline constexpr uint64_t kMaxCfaColumn = 1023; // larger register numbers are malformed

// The CIE facts an instruction's meaning depends on.
struct CfaFactors {
  uint64_t code_align = 0;
  int64_t data_align = 0;
};

// Applies `in` to `rules`. `in_fde`: the program is an FDE's (a CIE's initial instructions do
// not move the location). `Rules` provides (offsets are factored, rules of RegisterRule kinds):
//   uint64_t location() const;
//   CfaFault advance_to(uint64_t next);              // the row so far ends at next
//   CfaFault set(unsigned column, RegisterRule::Kind, int64_t offset, unsigned reg,
//                const CfaInstruction& in);          // in.expression for expression kinds
//   void restore(unsigned column, bool in_fde);      // the CIE's rule (in an FDE), or none
//   CfaFault remember();  CfaFault restore_state();  // restore_state keeps args_size
//   CfaFault def_cfa(unsigned reg, int64_t offset);
//   void def_cfa_register(unsigned reg);             // an expression CFA becomes reg + 0
//   bool cfa_is_expression() const;
//   CfaFault def_cfa_offset(int64_t offset);
//   CfaFault def_cfa_expression(const CfaInstruction& in);
//   void args_size(int64_t size);
template <class Rules>
inline CfaFault apply_cfa_instruction(const CfaInstruction& in, const CfaFactors& cie, bool in_fde,
                                      Rules& rules) {
  if (in.reg > kMaxCfaColumn) return CfaFault::RegisterTooLarge;
  const auto reg = static_cast<unsigned>(in.reg);
  // Wrapping arithmetic: hostile operands must not overflow a signed multiplication.
  const int64_t factored = static_cast<int64_t>(static_cast<uint64_t>(in.operand) *
                                                static_cast<uint64_t>(cie.data_align));
  using K = RegisterRule::Kind;
  switch (in.opcode) {
  case dw::CFA_advance_loc:
  case dw::CFA_advance_loc1:
  case dw::CFA_advance_loc2:
  case dw::CFA_advance_loc4:
  case dw::CFA_MIPS_advance_loc8: {
    if (!in_fde) return CfaFault::None;
    const uint64_t loc = rules.location(), step = in.delta * cie.code_align;
    if (loc + step < loc) return CfaFault::LocationOverflows;
    return rules.advance_to(loc + step);
  }
  case dw::CFA_set_loc:
    if (!in_fde) return CfaFault::None;
    if (in.address < rules.location()) return CfaFault::LocationBackwards;
    return rules.advance_to(in.address);
  case dw::CFA_offset:
  case dw::CFA_offset_extended:
  case dw::CFA_offset_extended_sf:
    return rules.set(reg, K::Offset, factored, 0, in);
  case dw::CFA_GNU_negative_offset_extended:
    return rules.set(reg, K::Offset, static_cast<int64_t>(0 - static_cast<uint64_t>(factored)), 0,
                     in);
  case dw::CFA_val_offset:
  case dw::CFA_val_offset_sf:
    return rules.set(reg, K::ValOffset, factored, 0, in);
  case dw::CFA_restore:
  case dw::CFA_restore_extended:
    rules.restore(reg, in_fde);
    return CfaFault::None;
  case dw::CFA_undefined:
    return rules.set(reg, K::Undefined, 0, 0, in);
  case dw::CFA_same_value:
    return rules.set(reg, K::SameValue, 0, 0, in);
  case dw::CFA_register:
    if (in.reg2 > kMaxCfaColumn) return CfaFault::RegisterTooLarge;
    return rules.set(reg, K::Register, 0, static_cast<unsigned>(in.reg2), in);
  case dw::CFA_remember_state:
    return rules.remember();
  case dw::CFA_restore_state:
    return rules.restore_state();
  case dw::CFA_def_cfa:
    return rules.def_cfa(reg, in.operand);
  case dw::CFA_def_cfa_sf:
    return rules.def_cfa(reg, factored);
  case dw::CFA_def_cfa_register:
    rules.def_cfa_register(reg);
    return CfaFault::None;
  case dw::CFA_def_cfa_offset:
  case dw::CFA_def_cfa_offset_sf:
    if (rules.cfa_is_expression()) return CfaFault::CfaIsExpression;
    return rules.def_cfa_offset(in.opcode == dw::CFA_def_cfa_offset ? in.operand : factored);
  case dw::CFA_def_cfa_expression:
    return rules.def_cfa_expression(in);
  case dw::CFA_expression:
    return rules.set(reg, K::Expression, 0, 0, in);
  case dw::CFA_val_expression:
    return rules.set(reg, K::ValExpression, 0, 0, in);
  case dw::CFA_GNU_args_size:
    rules.args_size(in.operand);
    return CfaFault::None;
  case dw::CFA_nop:
  case dw::CFA_GNU_window_save: // SPARC/AArch64 only; no x86_64 meaning
    return CfaFault::None;
  default:
    return CfaFault::Unhandled;
  }
}

} // namespace ehelf
