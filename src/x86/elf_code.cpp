#include "x86/elf_code.hpp"

#include <elf.h>

#include "x86/decoder.hpp"

namespace ehelf::x86 {

std::string instruction_text(const ElfFile& elf, uint64_t address) {
  static const Decoder decoder;
  for (const Section& s : elf.sections())
    if (address >= s.addr && address - s.addr < s.size && (s.flags & SHF_EXECINSTR))
      if (auto d = elf.section_data(s))
        return decoder.format(d->subspan(address - s.addr), address);
  return "?";
}

} // namespace ehelf::x86
