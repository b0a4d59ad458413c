#include "elf/dynamic_relocations.hpp"

#include <elf.h>

#include <cstring>

namespace ehelf {

namespace {

// Calls `each(rela)` for every entry of every SHT_RELA section `accept(section)` takes.
template <typename Accept, typename Each>
void for_each_rela(const ElfFile& elf, Accept accept, Each each) {
  for (const Section& rs : elf.sections()) {
    if (rs.type != SHT_RELA || !accept(rs)) continue;
    auto data = elf.section_data(rs);
    if (!data) continue;
    for (size_t off = 0; off + sizeof(Elf64_Rela) <= data->size(); off += sizeof(Elf64_Rela)) {
      Elf64_Rela rela;
      std::memcpy(&rela, data->data() + off, sizeof rela);
      each(rela);
    }
  }
}

} // namespace

std::vector<NamedRelocation> dynamic_relocations(const ElfFile& elf) {
  std::vector<NamedRelocation> out;
  const Section* dynsym = elf.find_section(".dynsym");
  const Section* dynstr = elf.find_section(".dynstr");
  if (!dynsym || !dynstr) return out;
  auto syms = elf.section_data(*dynsym);
  auto strs = elf.section_data(*dynstr);
  if (!syms || !strs) return out;
  for_each_rela(
      elf, [&](const Section& rs) { return rs.link == dynsym->index; },
      [&](const Elf64_Rela& rela) {
        const uint64_t sym = ELF64_R_SYM(rela.r_info);
        if (!sym || (sym + 1) * sizeof(Elf64_Sym) > syms->size()) return;
        Elf64_Sym es;
        std::memcpy(&es, syms->data() + sym * sizeof(Elf64_Sym), sizeof es);
        if (es.st_name >= strs->size()) return;
        const char* name = reinterpret_cast<const char*>(strs->data()) + es.st_name;
        const size_t len = strnlen(name, strs->size() - es.st_name);
        out.push_back({rela.r_offset, uint32_t(ELF64_R_TYPE(rela.r_info)), {name, len}});
      });
  return out;
}

std::vector<uint64_t> relative_relocation_addends(const ElfFile& elf) {
  std::vector<uint64_t> out;
  for_each_rela(
      elf, [](const Section&) { return true; },
      [&](const Elf64_Rela& rela) {
        const uint32_t type = ELF64_R_TYPE(rela.r_info);
        if (type == R_X86_64_RELATIVE || type == R_X86_64_IRELATIVE)
          out.push_back(uint64_t(rela.r_addend));
      });
  return out;
}

} // namespace ehelf
