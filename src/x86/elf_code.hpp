// Instructions read from an ELF file's executable sections, for reports that name code by its
// address in the file (SVMA): `ehelf synth`'s disagreements, a replayed check's inconsistencies.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "elf/elf_file.hpp"

namespace ehelf::x86 {

// The instruction at `address` in an executable section of `elf` (AT&T, objdump's look), or "?".
std::string instruction_text(const ElfFile& elf, uint64_t address);

// The bytes of the executable section holding `address`, from there to the section's end;
// empty when no executable section with contents in the file holds it.
std::span<const uint8_t> code_from(const ElfFile& elf, uint64_t address);

} // namespace ehelf::x86
