// CfaInstruction: one decoded DW_CFA_* instruction, and the decoder for a CIE/FDE program.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dwarf/cfi_section.hpp"
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
// wrong (a static string: decoding never allocates, for lookups in signal handlers).
const char* decode_cfa_instruction(ByteCursor& c, const Cie& cie, const PointerBases& bases,
                                   CfaInstruction& in);

// Decodes the program of a CIE (fde == nullptr) or an FDE. Errors name the section offset of the
// bad instruction. `bases` is needed for DW_CFA_set_loc.
Result<std::vector<CfaInstruction>> decode_cfa_program(const CfiSection& section, const Cie& cie,
                                                       const Fde* fde, const PointerBases& bases);

} // namespace ehelf
