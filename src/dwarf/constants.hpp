// DWARF call-frame constants: DW_CFA_* opcodes and DW_EH_PE_* pointer encodings.
#pragma once

#include <cstdint>
#include <string_view>

namespace ehelf::dw {

enum Cfa : uint8_t {
  // High two bits carry the opcode, low six bits an operand.
  CFA_advance_loc = 0x40,
  CFA_offset = 0x80,
  CFA_restore = 0xc0,
  // Extended opcodes (high bits zero).
  CFA_nop = 0x00,
  CFA_set_loc = 0x01,
  CFA_advance_loc1 = 0x02,
  CFA_advance_loc2 = 0x03,
  CFA_advance_loc4 = 0x04,
  CFA_offset_extended = 0x05,
  CFA_restore_extended = 0x06,
  CFA_undefined = 0x07,
  CFA_same_value = 0x08,
  CFA_register = 0x09,
  CFA_remember_state = 0x0a,
  CFA_restore_state = 0x0b,
  CFA_def_cfa = 0x0c,
  CFA_def_cfa_register = 0x0d,
  CFA_def_cfa_offset = 0x0e,
  CFA_def_cfa_expression = 0x0f,
  CFA_expression = 0x10,
  CFA_offset_extended_sf = 0x11,
  CFA_def_cfa_sf = 0x12,
  CFA_def_cfa_offset_sf = 0x13,
  CFA_val_offset = 0x14,
  CFA_val_offset_sf = 0x15,
  CFA_val_expression = 0x16,
  CFA_MIPS_advance_loc8 = 0x1d,
  CFA_GNU_window_save = 0x2d, // SPARC (also AArch64 negate_ra_state); not meaningful on x86_64
  CFA_GNU_args_size = 0x2e,
  CFA_GNU_negative_offset_extended = 0x2f,
};

// Name ("DW_CFA_def_cfa_offset"), or empty if unknown. Primary opcodes are named by high bits.
std::string_view cfa_name(uint8_t opcode);

enum EhPe : uint8_t {
  EH_PE_absptr = 0x00,
  EH_PE_uleb128 = 0x01,
  EH_PE_udata2 = 0x02,
  EH_PE_udata4 = 0x03,
  EH_PE_udata8 = 0x04,
  EH_PE_sleb128 = 0x09,
  EH_PE_sdata2 = 0x0a,
  EH_PE_sdata4 = 0x0b,
  EH_PE_sdata8 = 0x0c,
  EH_PE_signed = 0x08,
  EH_PE_pcrel = 0x10,
  EH_PE_textrel = 0x20,
  EH_PE_datarel = 0x30,
  EH_PE_funcrel = 0x40,
  EH_PE_aligned = 0x50,
  EH_PE_indirect = 0x80,
  EH_PE_omit = 0xff,
};

} // namespace ehelf::dw
