// Zydis registers as x86::Reg: the 64-bit general-purpose register enclosing a Zydis register
// (eax, ax and al are rax). Internal to the x86 layer, shared by its decoders.
#pragma once

#include <Zydis/Zydis.h>

#include "x86/instruction.hpp"

namespace ehelf::x86 {

inline Reg gpr(ZydisRegister r) {
  if (r == ZYDIS_REGISTER_NONE) return Reg::none;
  const ZydisRegister wide = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
  if (wide < ZYDIS_REGISTER_RAX || wide > ZYDIS_REGISTER_R15) return Reg::none;
  return Reg(wide - ZYDIS_REGISTER_RAX);
}

} // namespace ehelf::x86
