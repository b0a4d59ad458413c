// CfaInstruction: one decoded DW_CFA_* instruction, and the decoder for a CIE/FDE program.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dwarf/cfi_section.hpp"
#include "dwarf/constants.hpp"
#include "dwarf/pointer_encoding.hpp"
#include "support/byte_cursor.hpp"
#include "support/result.hpp"

namespace ehelf {

// Operands are raw (not yet multiplied by code/data alignment factors):
//   advance_loc*, MIPS_advance_loc8:      delta = code units
//   set_loc:                              address = decoded pointer (SVMA)
//   offset*, val_offset*, GNU_negative_*: reg, and offset (unfactored; signed for *_sf)
//   restore*, undefined, same_value, def_cfa_register: reg
//   register:                             reg, reg2
//   def_cfa(_sf):                         reg, offset (unfactored for _sf)
//   def_cfa_offset(_sf):                  offset
//   def_cfa_expression:                   expression
//   expression, val_expression:           reg, expression
//   GNU_args_size:                        offset (the size)
// The high-bit primary opcodes are reported as DW_CFA_advance_loc/offset/restore (0x40/0x80/0xc0)
// with their operand moved to delta or reg.
struct CfaInstruction {
  uint8_t opcode = 0;
  uint64_t offset = 0; // byte offset of the opcode within the section
  uint64_t delta = 0;
  uint64_t address = 0;
  uint64_t reg = 0;
  uint64_t reg2 = 0;
  int64_t operand = 0; // offset/size operand; unsigned operands are stored as their bit pattern
  std::span<const uint8_t> expression;
};

// Decodes the instruction at c's position into `in` and moves past it. Returns null, or what is
// wrong (a static string: decoding never allocates, for lookups in signal handlers). Inline: a
// row lookup decodes ~30 instructions of its FDE's program, and the call and its register saves
// were half of each one's cost.
inline const char* decode_cfa_instruction(ByteCursor& c, const Cie& cie, const PointerBases& bases,
                                          CfaInstruction& in) {
  in = CfaInstruction{};
  in.offset = c.offset();
  uint8_t op = c.u8();
  uint8_t high = op & 0xc0;
  if (high) {
    in.opcode = high;
    if (high == dw::CFA_advance_loc)
      in.delta = op & 0x3f;
    else if (high == dw::CFA_offset) {
      in.reg = op & 0x3f;
      in.operand = static_cast<int64_t>(c.uleb());
    } else
      in.reg = op & 0x3f;
  } else {
    in.opcode = op;
    switch (op) {
    case dw::CFA_nop:
    case dw::CFA_remember_state:
    case dw::CFA_restore_state:
    case dw::CFA_GNU_window_save:
      break;
    case dw::CFA_set_loc: {
      uint8_t enc = cie.fde_encoding & 0x7f;
      if (!read_encoded_pointer(c, enc, bases, in.address))
        return "truncated or invalid DW_CFA_set_loc operand";
      break;
    }
    case dw::CFA_advance_loc1:
      in.delta = c.u8();
      break;
    case dw::CFA_advance_loc2:
      in.delta = c.u16();
      break;
    case dw::CFA_advance_loc4:
      in.delta = c.u32();
      break;
    case dw::CFA_MIPS_advance_loc8:
      in.delta = c.u64();
      break;
    case dw::CFA_offset_extended:
    case dw::CFA_val_offset:
    case dw::CFA_GNU_negative_offset_extended:
      in.reg = c.uleb();
      in.operand = static_cast<int64_t>(c.uleb());
      break;
    case dw::CFA_offset_extended_sf:
    case dw::CFA_val_offset_sf:
      in.reg = c.uleb();
      in.operand = c.sleb();
      break;
    case dw::CFA_restore_extended:
    case dw::CFA_undefined:
    case dw::CFA_same_value:
    case dw::CFA_def_cfa_register:
      in.reg = c.uleb();
      break;
    case dw::CFA_register:
      in.reg = c.uleb();
      in.reg2 = c.uleb();
      break;
    case dw::CFA_def_cfa:
      in.reg = c.uleb();
      in.operand = static_cast<int64_t>(c.uleb());
      break;
    case dw::CFA_def_cfa_sf:
      in.reg = c.uleb();
      in.operand = c.sleb();
      break;
    case dw::CFA_def_cfa_offset:
      in.operand = static_cast<int64_t>(c.uleb());
      break;
    case dw::CFA_def_cfa_offset_sf:
      in.operand = c.sleb();
      break;
    case dw::CFA_GNU_args_size:
      in.operand = static_cast<int64_t>(c.uleb());
      break;
    case dw::CFA_def_cfa_expression:
      in.expression = c.bytes(c.uleb());
      break;
    case dw::CFA_expression:
    case dw::CFA_val_expression:
      in.reg = c.uleb();
      in.expression = c.bytes(c.uleb());
      break;
    default:
      return "unknown call frame instruction";
    }
  }
  if (!c.ok()) return "truncated operand";
  return nullptr;
}

// decode_cfa_instruction with its problem as an Error naming the section and offset.
Status decode_cfa_step(const CfiSection& section, ByteCursor& c, const Cie& cie,
                       const PointerBases& bases, CfaInstruction& in);

// Decodes the program of a CIE (fde == nullptr) or an FDE. Errors name the section offset of the
// bad instruction; a program of more than cfi_limits::kMaxInstructionsPerProgram instructions is
// refused. `bases` is needed for DW_CFA_set_loc.
Result<std::vector<CfaInstruction>> decode_cfa_program(const CfiSection& section, const Cie& cie,
                                                       const Fde* fde, const PointerBases& bases);

} // namespace ehelf
