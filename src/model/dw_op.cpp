#include "model/dw_op.hpp"

#include <array>
#include <string>

#include <fmt/format.h>

namespace ehelf {
namespace {

struct OpTable {
  std::array<std::string, 256> names;
  std::array<DwOpForm, 256> forms{};
};

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    auto def = [&t](uint8_t op, const char* name, DwOpForm form) {
      t.names[op] = name;
      t.forms[op] = form;
    };
    def(OP_addr, "DW_OP_addr", DwOpForm::Addr);
    def(OP_deref, "DW_OP_deref", DwOpForm::None);
    def(OP_const1u, "DW_OP_const1u", DwOpForm::U8);
    def(OP_const1s, "DW_OP_const1s", DwOpForm::S8);
    def(OP_const2u, "DW_OP_const2u", DwOpForm::U16);
    def(OP_const2s, "DW_OP_const2s", DwOpForm::S16);
    def(OP_const4u, "DW_OP_const4u", DwOpForm::U32);
    def(OP_const4s, "DW_OP_const4s", DwOpForm::S32);
    def(OP_const8u, "DW_OP_const8u", DwOpForm::U64);
    def(OP_const8s, "DW_OP_const8s", DwOpForm::S64);
    def(OP_constu, "DW_OP_constu", DwOpForm::Uleb);
    def(OP_consts, "DW_OP_consts", DwOpForm::Sleb);
    def(OP_dup, "DW_OP_dup", DwOpForm::None);
    def(OP_drop, "DW_OP_drop", DwOpForm::None);
    def(OP_over, "DW_OP_over", DwOpForm::None);
    def(OP_pick, "DW_OP_pick", DwOpForm::U8);
    def(OP_swap, "DW_OP_swap", DwOpForm::None);
    def(OP_rot, "DW_OP_rot", DwOpForm::None);
    def(OP_xderef, "DW_OP_xderef", DwOpForm::None);
    def(OP_abs, "DW_OP_abs", DwOpForm::None);
    def(OP_and, "DW_OP_and", DwOpForm::None);
    def(OP_div, "DW_OP_div", DwOpForm::None);
    def(OP_minus, "DW_OP_minus", DwOpForm::None);
    def(OP_mod, "DW_OP_mod", DwOpForm::None);
    def(OP_mul, "DW_OP_mul", DwOpForm::None);
    def(OP_neg, "DW_OP_neg", DwOpForm::None);
    def(OP_not, "DW_OP_not", DwOpForm::None);
    def(OP_or, "DW_OP_or", DwOpForm::None);
    def(OP_plus, "DW_OP_plus", DwOpForm::None);
    def(OP_plus_uconst, "DW_OP_plus_uconst", DwOpForm::Uleb);
    def(OP_shl, "DW_OP_shl", DwOpForm::None);
    def(OP_shr, "DW_OP_shr", DwOpForm::None);
    def(OP_shra, "DW_OP_shra", DwOpForm::None);
    def(OP_xor, "DW_OP_xor", DwOpForm::None);
    def(OP_bra, "DW_OP_bra", DwOpForm::Branch);
    def(OP_eq, "DW_OP_eq", DwOpForm::None);
    def(OP_ge, "DW_OP_ge", DwOpForm::None);
    def(OP_gt, "DW_OP_gt", DwOpForm::None);
    def(OP_le, "DW_OP_le", DwOpForm::None);
    def(OP_lt, "DW_OP_lt", DwOpForm::None);
    def(OP_ne, "DW_OP_ne", DwOpForm::None);
    def(OP_skip, "DW_OP_skip", DwOpForm::Branch);
    for (unsigned i = 0; i < 32; ++i) {
      t.names[OP_lit0 + i] = fmt::format("DW_OP_lit{}", i);
      t.forms[OP_lit0 + i] = DwOpForm::None;
      t.names[OP_reg0 + i] = fmt::format("DW_OP_reg{}", i);
      t.forms[OP_reg0 + i] = DwOpForm::None;
      t.names[OP_breg0 + i] = fmt::format("DW_OP_breg{}", i);
      t.forms[OP_breg0 + i] = DwOpForm::Sleb;
    }
    def(OP_regx, "DW_OP_regx", DwOpForm::Uleb);
    def(OP_fbreg, "DW_OP_fbreg", DwOpForm::Sleb);
    def(OP_bregx, "DW_OP_bregx", DwOpForm::UlebSleb);
    def(OP_piece, "DW_OP_piece", DwOpForm::Uleb);
    def(OP_deref_size, "DW_OP_deref_size", DwOpForm::U8);
    def(OP_xderef_size, "DW_OP_xderef_size", DwOpForm::U8);
    def(OP_nop, "DW_OP_nop", DwOpForm::None);
    def(OP_push_object_address, "DW_OP_push_object_address", DwOpForm::None);
    def(OP_call2, "DW_OP_call2", DwOpForm::U16);
    def(OP_call4, "DW_OP_call4", DwOpForm::U32);
    def(OP_call_ref, "DW_OP_call_ref", DwOpForm::Offset);
    def(OP_form_tls_address, "DW_OP_form_tls_address", DwOpForm::None);
    def(OP_call_frame_cfa, "DW_OP_call_frame_cfa", DwOpForm::None);
    def(OP_bit_piece, "DW_OP_bit_piece", DwOpForm::UlebUleb);
    def(OP_implicit_value, "DW_OP_implicit_value", DwOpForm::Block);
    def(OP_stack_value, "DW_OP_stack_value", DwOpForm::None);
    def(OP_implicit_pointer, "DW_OP_implicit_pointer", DwOpForm::OffsetSleb);
    def(OP_addrx, "DW_OP_addrx", DwOpForm::Uleb);
    def(OP_constx, "DW_OP_constx", DwOpForm::Uleb);
    def(OP_entry_value, "DW_OP_entry_value", DwOpForm::SubExpr);
    def(OP_const_type, "DW_OP_const_type", DwOpForm::TypedConst);
    def(OP_regval_type, "DW_OP_regval_type", DwOpForm::UlebUleb);
    def(OP_deref_type, "DW_OP_deref_type", DwOpForm::U8Uleb);
    def(OP_xderef_type, "DW_OP_xderef_type", DwOpForm::U8Uleb);
    def(OP_convert, "DW_OP_convert", DwOpForm::Uleb);
    def(OP_reinterpret, "DW_OP_reinterpret", DwOpForm::Uleb);
    def(OP_GNU_push_tls_address, "DW_OP_GNU_push_tls_address", DwOpForm::None);
    def(OP_GNU_uninit, "DW_OP_GNU_uninit", DwOpForm::None);
    def(OP_GNU_implicit_pointer, "DW_OP_GNU_implicit_pointer", DwOpForm::OffsetSleb);
    def(OP_GNU_entry_value, "DW_OP_GNU_entry_value", DwOpForm::SubExpr);
    def(OP_GNU_const_type, "DW_OP_GNU_const_type", DwOpForm::TypedConst);
    def(OP_GNU_regval_type, "DW_OP_GNU_regval_type", DwOpForm::UlebUleb);
    def(OP_GNU_deref_type, "DW_OP_GNU_deref_type", DwOpForm::U8Uleb);
    def(OP_GNU_convert, "DW_OP_GNU_convert", DwOpForm::Uleb);
    def(OP_GNU_reinterpret, "DW_OP_GNU_reinterpret", DwOpForm::Uleb);
    def(OP_GNU_parameter_ref, "DW_OP_GNU_parameter_ref", DwOpForm::U32);
    def(OP_GNU_addr_index, "DW_OP_GNU_addr_index", DwOpForm::Uleb);
    def(OP_GNU_const_index, "DW_OP_GNU_const_index", DwOpForm::Uleb);
    def(OP_GNU_variable_value, "DW_OP_GNU_variable_value", DwOpForm::Offset);
    return t;
  }();
  return table;
}

} // namespace

std::string_view dw_op_name(uint8_t opcode) {
  return op_table().names[opcode];
}

DwOpForm dw_op_form(uint8_t opcode) {
  return op_table().forms[opcode];
}

} // namespace ehelf
