// The eh_elf register slots (enum ehelf_register in include/ehelf/eh_elf.h) and their DWARF
// numbers: the one map between an ehelf_context_t and a RegisterState, used by the code
// generator, the runtime's compiled backend and the checks that compare the two.
#pragma once

#include <cstdint>

#include "ehelf/eh_elf.h"
#include "model/register_state.hpp"

namespace ehelf {

// Which registers an eh_elf tracks (ehelf_register_set): the first 4 slots or all 8.
enum class RegisterSet { Minimal, CalleeSaved };

// DWARF numbers of rip, rsp, rbp, rbx, r12-r15, in slot order.
inline constexpr unsigned kDwarfRegisterOfSlot[EHELF_NREGS] = {16, 7, 6, 3, 12, 13, 14, 15};

inline constexpr unsigned slot_count(RegisterSet set) {
  return set == RegisterSet::Minimal ? 4 : EHELF_NREGS;
}

inline RegisterSet register_set_of(const ehelf_info& info) {
  return info.register_set == EHELF_REGISTERS_MINIMAL ? RegisterSet::Minimal
                                                      : RegisterSet::CalleeSaved;
}

// Context slot of a DWARF register for a register set, or -1.
inline int context_slot(unsigned dwarf_reg, RegisterSet set) {
  for (unsigned slot = 0; slot < slot_count(set); ++slot)
    if (kDwarfRegisterOfSlot[slot] == dwarf_reg) return int(slot);
  return -1;
}

// The known registers of `regs` in the set's slots, each marked valid; other fields zero.
inline ehelf_context_t to_context(const RegisterState& regs, RegisterSet set) {
  ehelf_context_t ctx{};
  for (unsigned slot = 0; slot < slot_count(set); ++slot)
    if (regs.has(kDwarfRegisterOfSlot[slot])) {
      ctx.regs[slot] = regs.get(kDwarfRegisterOfSlot[slot]);
      ctx.flags |= EHELF_VALID(slot);
    }
  return ctx;
}

// Writes the set's slots back: valid ones are set, the others become unknown.
inline void from_context(const ehelf_context_t& ctx, RegisterSet set, RegisterState& regs) {
  for (unsigned slot = 0; slot < slot_count(set); ++slot) {
    if (ctx.flags & EHELF_VALID(slot))
      regs.set(kDwarfRegisterOfSlot[slot], ctx.regs[slot]);
    else
      regs.clear(kDwarfRegisterOfSlot[slot]);
  }
}

} // namespace ehelf
