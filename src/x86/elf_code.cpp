#include "x86/elf_code.hpp"

#include <elf.h>

#include "x86/decoder.hpp"

namespace ehelf::x86 {

std::span<const uint8_t> code_from(const ElfFile& elf, uint64_t address) {
  for (const Section& s : elf.sections())
    if ((s.flags & SHF_EXECINSTR) && address >= s.addr && address - s.addr < s.size) {
      auto d = elf.section_data(s);
      if (!d || address - s.addr >= d->size()) return {};
      return d->subspan(address - s.addr);
    }
  return {};
}

std::string instruction_text(const ElfFile& elf, uint64_t address) {
  static const Decoder decoder;
  auto code = code_from(elf, address);
  return code.empty() ? "?" : decoder.format(code, address);
}

} // namespace ehelf::x86
