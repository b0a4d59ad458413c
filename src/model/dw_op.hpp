// The DWARF expression vocabulary (DWARF 5 section 7.7.1 and the GNU extensions): opcode
// values, readelf's names and how each opcode's operands are encoded. The one definition every
// decoder, evaluator, translator and report uses.
#pragma once

#include <cstdint>
#include <string_view>

namespace ehelf {

enum DwOp : uint8_t {
  OP_addr = 0x03,
  OP_deref = 0x06,
  OP_const1u = 0x08,
  OP_const1s = 0x09,
  OP_const2u = 0x0a,
  OP_const2s = 0x0b,
  OP_const4u = 0x0c,
  OP_const4s = 0x0d,
  OP_const8u = 0x0e,
  OP_const8s = 0x0f,
  OP_constu = 0x10,
  OP_consts = 0x11,
  OP_dup = 0x12,
  OP_drop = 0x13,
  OP_over = 0x14,
  OP_pick = 0x15,
  OP_swap = 0x16,
  OP_rot = 0x17,
  OP_xderef = 0x18,
  OP_abs = 0x19,
  OP_and = 0x1a,
  OP_div = 0x1b,
  OP_minus = 0x1c,
  OP_mod = 0x1d,
  OP_mul = 0x1e,
  OP_neg = 0x1f,
  OP_not = 0x20,
  OP_or = 0x21,
  OP_plus = 0x22,
  OP_plus_uconst = 0x23,
  OP_shl = 0x24,
  OP_shr = 0x25,
  OP_shra = 0x26,
  OP_xor = 0x27,
  OP_bra = 0x28,
  OP_eq = 0x29,
  OP_ge = 0x2a,
  OP_gt = 0x2b,
  OP_le = 0x2c,
  OP_lt = 0x2d,
  OP_ne = 0x2e,
  OP_skip = 0x2f,
  OP_lit0 = 0x30,
  OP_lit31 = 0x4f,
  OP_reg0 = 0x50,
  OP_reg31 = 0x6f,
  OP_breg0 = 0x70,
  OP_breg31 = 0x8f,
  OP_regx = 0x90,
  OP_fbreg = 0x91,
  OP_bregx = 0x92,
  OP_piece = 0x93,
  OP_deref_size = 0x94,
  OP_xderef_size = 0x95,
  OP_nop = 0x96,
  OP_push_object_address = 0x97,
  OP_call2 = 0x98,
  OP_call4 = 0x99,
  OP_call_ref = 0x9a,
  OP_form_tls_address = 0x9b,
  OP_call_frame_cfa = 0x9c,
  OP_bit_piece = 0x9d,
  OP_implicit_value = 0x9e,
  OP_stack_value = 0x9f,
  OP_implicit_pointer = 0xa0,
  OP_addrx = 0xa1,
  OP_constx = 0xa2,
  OP_entry_value = 0xa3,
  OP_const_type = 0xa4,
  OP_regval_type = 0xa5,
  OP_deref_type = 0xa6,
  OP_xderef_type = 0xa7,
  OP_convert = 0xa8,
  OP_reinterpret = 0xa9,
  OP_GNU_push_tls_address = 0xe0,
  OP_GNU_uninit = 0xf0,
  OP_GNU_implicit_pointer = 0xf2,
  OP_GNU_entry_value = 0xf3,
  OP_GNU_const_type = 0xf4,
  OP_GNU_regval_type = 0xf5,
  OP_GNU_deref_type = 0xf6,
  OP_GNU_convert = 0xf7,
  OP_GNU_reinterpret = 0xf9,
  OP_GNU_parameter_ref = 0xfa,
  OP_GNU_addr_index = 0xfb,
  OP_GNU_const_index = 0xfc,
  OP_GNU_variable_value = 0xfd,
};

// How the operands of an opcode are encoded.
enum class DwOpForm : uint8_t {
  Unknown, // not an opcode we decode
  None,    // no operand
  Addr,    // address_size bytes
  U8,
  S8,
  U16,
  S16,
  U32,
  S32,
  U64,
  S64,
  Uleb,
  Sleb,
  UlebSleb,   // bregx
  UlebUleb,   // bit_piece, regval_type
  U8Uleb,     // deref_type, xderef_type
  Branch,     // skip, bra: signed 2-byte displacement
  Block,      // implicit_value: uleb length, then that many bytes
  SubExpr,    // entry_value: uleb length, then a nested expression
  TypedConst, // const_type: uleb type, 1-byte length, then that many bytes
  Offset,     // a .debug_info offset; CFI does not say whether DWARF64, so 4 bytes (DWARF32)
  OffsetSleb, // implicit_pointer
};

// DW_OP_* name ("DW_OP_breg7"), or empty for an unknown opcode. The names are built on first
// use; a process that must not allocate later (the C library) calls this once at load.
std::string_view dw_op_name(uint8_t opcode);

// How the operands of `opcode` are encoded; Unknown for an opcode we do not decode.
DwOpForm dw_op_form(uint8_t opcode);

} // namespace ehelf
