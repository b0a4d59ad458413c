#include "dwarf/cfa_instruction.hpp"

#include <fmt/format.h>

#include "dwarf/constants.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf {

const char* decode_cfa_instruction(ByteCursor& c, const Cie& cie, const PointerBases& bases,
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

Result<std::vector<CfaInstruction>> decode_cfa_program(const CfiSection& section, const Cie& cie,
                                                       const Fde* fde, const PointerBases& bases) {
  std::span<const uint8_t> bytes = fde ? fde->instructions : cie.instructions;
  ByteCursor c(bytes, fde ? fde->instructions_offset : cie.instructions_offset);
  std::vector<CfaInstruction> out;
  out.reserve(bytes.size() / 2 + 1);
  while (!c.at_end()) {
    CfaInstruction in;
    if (const char* problem = decode_cfa_instruction(c, cie, bases, in)) {
      std::string_view p = problem;
      if (p == "unknown call frame instruction")
        return Error::at(section.name, in.offset,
                         fmt::format("unknown call frame instruction {:#04x}", in.opcode));
      if (p == "truncated operand")
        return Error::at(section.name, in.offset,
                         fmt::format("truncated operand of {}", dw::cfa_name(in.opcode)));
      return Error::at(section.name, in.offset, std::string(p));
    }
    out.push_back(in);
  }
  return out;
}

} // namespace ehelf
