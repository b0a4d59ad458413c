// The dynamic relocations of a file with the names of their symbols: which GOT or data slot the
// loader binds to which function (the PLT stubs of noreturn functions, the personality routine's
// pointer); and the addresses its relative relocations store (function pointers).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "elf/elf_file.hpp"

namespace ehelf {

struct NamedRelocation {
  uint64_t offset = 0; // the slot's SVMA
  uint32_t type = 0;   // R_X86_64_*
  std::string_view name;
};

// Every SHT_RELA entry bound to .dynsym, with a symbol (names point into the file).
std::vector<NamedRelocation> dynamic_relocations(const ElfFile& elf);

// The addends of the R_X86_64_RELATIVE and R_X86_64_IRELATIVE entries of every SHT_RELA
// section: the addresses a position-independent file stores in its data (function pointers in
// vtables, callback tables and .init_array; IFUNC resolvers), as link-time addresses.
std::vector<uint64_t> relative_relocation_addends(const ElfFile& elf);

} // namespace ehelf
