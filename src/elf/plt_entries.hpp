// The PLT entries of a file and the GOT slot each jumps through: what names an entry (the
// relocation that binds its slot) and tells the synthesizer which calls never return.
#pragma once

#include <cstdint>
#include <vector>

#include "elf/elf_file.hpp"

namespace ehelf {

struct PltEntry {
  uint64_t address = 0; // the entry's SVMA
  uint64_t size = 0;    // 16, or 8 (.plt.got without IBT)
  uint64_t slot = 0;    // the GOT slot its `jmp *disp(%rip)` reads (SVMA)
};

// The entries of .plt (after its first, the resolver's), .plt.sec, .plt.got (every executable
// .plt* section), by address, that jump through a GOT slot in the psABI's forms: `jmp
// *disp32(%rip)`, after an endbr64 and with a bnd prefix in .plt.sec's (IBT). Entries are 16
// bytes, or 8 when the section says so (.plt.got's without IBT). A lazy .plt's entries in an IBT
// file (endbr64, push, jmp to the first entry) have no slot and are not listed.
std::vector<PltEntry> plt_entries(const ElfFile& elf);

} // namespace ehelf
