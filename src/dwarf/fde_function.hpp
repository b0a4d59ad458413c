// The model's FunctionInfo of one FDE of a parsed section: its range, LSDA and its CIE's
// personality, return column and 'S' flag. What build_unwind_table records for every function,
// and what anything else building a table from a CfiSection must record the same way.
#pragma once

#include "dwarf/cfi_section.hpp"
#include "model/unwind_table.hpp"

namespace ehelf {

inline FunctionInfo function_of(const CfiSection& section, const Fde& fde) {
  const Cie& cie = section.cies[fde.cie];
  FunctionInfo info;
  info.pc_begin = fde.pc_begin;
  info.pc_end = fde.pc_end();
  info.fde_offset = fde.offset;
  info.lsda = fde.has_lsda ? fde.lsda : 0;
  info.personality = cie.personality;
  info.personality_slot = cie.personality_slot;
  info.return_column = static_cast<uint16_t>(cie.ra_register);
  info.signal_frame = cie.signal_frame;
  info.from_debug_frame = section.format == CfiFormat::DebugFrame;
  return info;
}

} // namespace ehelf
