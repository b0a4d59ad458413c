#include "dwarf/constants.hpp"

namespace ehelf::dw {

std::string_view cfa_name(uint8_t opcode) {
  switch (opcode & 0xc0) {
  case CFA_advance_loc: return "DW_CFA_advance_loc";
  case CFA_offset: return "DW_CFA_offset";
  case CFA_restore: return "DW_CFA_restore";
  default: break;
  }
  switch (opcode) {
  case CFA_nop: return "DW_CFA_nop";
  case CFA_set_loc: return "DW_CFA_set_loc";
  case CFA_advance_loc1: return "DW_CFA_advance_loc1";
  case CFA_advance_loc2: return "DW_CFA_advance_loc2";
  case CFA_advance_loc4: return "DW_CFA_advance_loc4";
  case CFA_offset_extended: return "DW_CFA_offset_extended";
  case CFA_restore_extended: return "DW_CFA_restore_extended";
  case CFA_undefined: return "DW_CFA_undefined";
  case CFA_same_value: return "DW_CFA_same_value";
  case CFA_register: return "DW_CFA_register";
  case CFA_remember_state: return "DW_CFA_remember_state";
  case CFA_restore_state: return "DW_CFA_restore_state";
  case CFA_def_cfa: return "DW_CFA_def_cfa";
  case CFA_def_cfa_register: return "DW_CFA_def_cfa_register";
  case CFA_def_cfa_offset: return "DW_CFA_def_cfa_offset";
  case CFA_def_cfa_expression: return "DW_CFA_def_cfa_expression";
  case CFA_expression: return "DW_CFA_expression";
  case CFA_offset_extended_sf: return "DW_CFA_offset_extended_sf";
  case CFA_def_cfa_sf: return "DW_CFA_def_cfa_sf";
  case CFA_def_cfa_offset_sf: return "DW_CFA_def_cfa_offset_sf";
  case CFA_val_offset: return "DW_CFA_val_offset";
  case CFA_val_offset_sf: return "DW_CFA_val_offset_sf";
  case CFA_val_expression: return "DW_CFA_val_expression";
  case CFA_MIPS_advance_loc8: return "DW_CFA_MIPS_advance_loc8";
  case CFA_GNU_window_save: return "DW_CFA_GNU_window_save";
  case CFA_GNU_args_size: return "DW_CFA_GNU_args_size";
  case CFA_GNU_negative_offset_extended: return "DW_CFA_GNU_negative_offset_extended";
  default: return {};
  }
}

} // namespace ehelf::dw
