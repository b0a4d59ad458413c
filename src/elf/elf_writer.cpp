#include "elf/elf_writer.hpp"

#include <elf.h>

#include <cstring>

namespace ehelf {

// elf_writer.hpp spells these as numbers, to keep <elf.h> out of its users.
static_assert(SHT_PROGBITS == 1 && SHT_NOTE == 7 && SHF_ALLOC == 2);

namespace {

template <typename T> void put(std::vector<uint8_t>& out, uint64_t at, const T& value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return a ? (v + a - 1) / a * a : v;
}

} // namespace

std::vector<uint8_t> write_elf_image(std::span<const ImageSection> sections) {
  constexpr uint64_t kPage = 0x1000;
  std::vector<const ImageSection*> in_segment;
  bool has_hdr = false;
  for (const ImageSection& s : sections)
    if (s.kind == ImageSection::Kind::Loaded) {
      in_segment.push_back(&s);
      has_hdr |= s.name == ".eh_frame_hdr";
    }
  const uint16_t phnum = in_segment.empty() ? 0 : (has_hdr ? 2 : 1);
  const uint64_t headers = sizeof(Elf64_Ehdr) + phnum * sizeof(Elf64_Phdr);

  // Loaded data sits at file offsets congruent to its address modulo the page, as PT_LOAD asks;
  // the other sections follow it.
  const uint64_t first = in_segment.empty() ? 0 : in_segment.front()->addr;
  const uint64_t last =
      in_segment.empty() ? 0 : in_segment.back()->addr + in_segment.back()->bytes.size();
  uint64_t base = in_segment.empty() ? headers : align_up(headers, kPage) + first % kPage;
  if (!in_segment.empty() && base >= kPage && base - kPage >= headers) base -= kPage;
  std::vector<uint64_t> offsets;
  uint64_t file_end = base + (last - first);
  for (const ImageSection& s : sections)
    if (s.kind == ImageSection::Kind::Loaded)
      offsets.push_back(base + (s.addr - first));
    else {
      file_end = align_up(file_end, s.align);
      offsets.push_back(file_end);
      file_end += s.bytes.size(); // none for a placeholder
    }

  std::string shstrtab(1, '\0');
  std::vector<uint32_t> names;
  for (const ImageSection& s : sections) {
    names.push_back(static_cast<uint32_t>(shstrtab.size()));
    shstrtab += s.name;
    shstrtab += '\0';
  }
  const uint32_t shstrtab_name = static_cast<uint32_t>(shstrtab.size());
  shstrtab += ".shstrtab";
  shstrtab += '\0';

  const uint64_t strtab_off = file_end;
  const uint64_t shoff = align_up(strtab_off + shstrtab.size(), 8);
  // Callers keep the count below SHN_LORESERVE; the buffer is sized for every section whatever
  // the count says.
  const size_t shcount = sections.size() + 2;
  const uint16_t shnum = static_cast<uint16_t>(shcount);
  std::vector<uint8_t> out(shoff + shcount * sizeof(Elf64_Shdr), 0);

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = phnum ? sizeof(Elf64_Ehdr) : 0;
  eh.e_shoff = shoff;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = phnum;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = shnum;
  eh.e_shstrndx = static_cast<uint16_t>(shnum - 1);
  put(out, 0, eh);

  if (phnum) {
    Elf64_Phdr load{};
    load.p_type = PT_LOAD;
    load.p_flags = PF_R;
    load.p_offset = base;
    load.p_vaddr = load.p_paddr = first;
    load.p_filesz = load.p_memsz = last - first;
    load.p_align = kPage;
    put(out, sizeof(Elf64_Ehdr), load);
  }
  Elf64_Shdr sh{};
  for (size_t i = 0; i < sections.size(); ++i) {
    const ImageSection& s = sections[i];
    const uint64_t off = offsets[i];
    if (!s.bytes.empty()) std::memcpy(out.data() + off, s.bytes.data(), s.bytes.size());
    const bool loaded = s.kind == ImageSection::Kind::Loaded;
    const bool placeholder = s.kind == ImageSection::Kind::Placeholder;
    sh = {};
    sh.sh_name = names[i];
    sh.sh_type = placeholder ? SHT_NOBITS : s.type;
    sh.sh_flags = loaded ? SHF_ALLOC : s.flags;
    sh.sh_addr = s.addr;
    sh.sh_offset = off;
    sh.sh_size = placeholder ? s.size : s.bytes.size();
    sh.sh_addralign = s.align;
    put(out, shoff + (i + 1) * sizeof(Elf64_Shdr), sh);
    if (loaded && s.name == ".eh_frame_hdr") {
      Elf64_Phdr ph{};
      ph.p_type = PT_GNU_EH_FRAME;
      ph.p_flags = PF_R;
      ph.p_offset = off;
      ph.p_vaddr = ph.p_paddr = s.addr;
      ph.p_filesz = ph.p_memsz = s.bytes.size();
      ph.p_align = 4;
      put(out, sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), ph);
    }
  }
  std::memcpy(out.data() + strtab_off, shstrtab.data(), shstrtab.size());
  sh = {};
  sh.sh_name = shstrtab_name;
  sh.sh_type = SHT_STRTAB;
  sh.sh_offset = strtab_off;
  sh.sh_size = shstrtab.size();
  sh.sh_addralign = 1;
  put(out, shoff + (shcount - 1) * sizeof(Elf64_Shdr), sh);
  return out;
}

} // namespace ehelf
