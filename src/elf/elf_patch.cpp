#include "elf/elf_patch.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace ehelf {

namespace {

constexpr uint64_t kPage = 0x1000;
constexpr uint64_t kMaxPadding = uint64_t(1) << 28; // zeros written before the new segment

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

template <typename T> void put(std::vector<uint8_t>& out, uint64_t at, const T& value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

bool has_eh_frame_phdr(const ElfFile& elf) {
  return std::any_of(elf.segments().begin(), elf.segments().end(),
                     [](const Segment& s) { return s.type == PT_GNU_EH_FRAME; });
}

} // namespace

Result<AppendPlan> plan_append(const ElfFile& elf) {
  const Segment* first = nullptr;
  uint64_t top = 0;
  for (const Segment& s : elf.segments())
    if (s.type == PT_LOAD) {
      if (!first) first = &s;
      if (s.memsz > kMaxPadding || s.vaddr > UINT64_MAX - s.memsz)
        return Error::plain("a PT_LOAD segment is too large").in_file(elf.name());
      top = std::max(top, s.vaddr + s.memsz);
    }
  if (!first) return Error::plain("no PT_LOAD segment to extend").in_file(elf.name());
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.bytes().data(), sizeof eh); // the parse checked the header's size
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum != elf.segments().size() ||
      eh.e_phnum > 0xff00)
    return Error::plain("unusual program header table").in_file(elf.name());
  const uint64_t bias = first->vaddr - first->offset; // address minus offset, kept
  AppendPlan plan;
  plan.phnum = static_cast<uint16_t>(elf.segments().size() + 1 + (has_eh_frame_phdr(elf) ? 0 : 1));
  if (top < bias || first->vaddr < first->offset)
    return Error::plain("PT_LOAD segments below the first one's base").in_file(elf.name());
  // The file is padded up to the segment's offset: bounded, as hostile headers may ask for more.
  if (top - bias > elf.bytes().size() + kMaxPadding)
    return Error::plain("the segments' memory lies too far beyond the file").in_file(elf.name());
  plan.file_offset = align_up(std::max<uint64_t>(elf.bytes().size(), top - bias), kPage);
  plan.vaddr = plan.file_offset + bias;
  plan.content_addr = align_up(plan.vaddr + plan.phnum * sizeof(Elf64_Phdr), 16);
  return plan;
}

Result<std::vector<uint8_t>> append_loaded_sections(const ElfFile& elf, const AppendPlan& plan,
                                                    std::span<const ImageSection> sections) {
  Elf64_Ehdr eh;
  if (elf.bytes().size() < sizeof eh)
    return Error::plain("truncated ELF header").in_file(elf.name());
  std::memcpy(&eh, elf.bytes().data(), sizeof eh);
  uint64_t end = plan.content_addr;
  for (const ImageSection& s : sections) {
    if (s.addr < end) return Error::plain(fmt::format("section {} overlaps", s.name));
    end = s.addr + s.bytes.size();
  }
  const uint64_t segment_size = end - plan.vaddr;
  std::vector<uint8_t> out(elf.bytes().begin(), elf.bytes().end());
  out.resize(plan.file_offset + segment_size, 0);

  // The program headers: the old ones (PT_PHDR moved, PT_GNU_EH_FRAME re-aimed), the new PT_LOAD
  // after the last PT_LOAD, a PT_GNU_EH_FRAME if there was none.
  const ImageSection* hdr = nullptr;
  for (const ImageSection& s : sections)
    if (s.name == ".eh_frame_hdr") hdr = &s;
  auto eh_frame_phdr = [&] {
    Elf64_Phdr p{};
    p.p_type = PT_GNU_EH_FRAME;
    p.p_flags = PF_R;
    p.p_offset = plan.file_offset + (hdr->addr - plan.vaddr);
    p.p_vaddr = p.p_paddr = hdr->addr;
    p.p_filesz = p.p_memsz = hdr->bytes.size();
    p.p_align = 4;
    return p;
  };
  std::vector<Elf64_Phdr> phdrs;
  size_t last_load = 0;
  for (size_t i = 0; i < elf.segments().size(); ++i) {
    Elf64_Phdr p;
    std::memcpy(&p, elf.bytes().data() + eh.e_phoff + i * sizeof p, sizeof p);
    if (p.p_type == PT_PHDR) {
      p.p_offset = plan.file_offset;
      p.p_vaddr = p.p_paddr = plan.vaddr;
      p.p_filesz = p.p_memsz = plan.phnum * sizeof(Elf64_Phdr);
    } else if (p.p_type == PT_GNU_EH_FRAME && hdr)
      p = eh_frame_phdr();
    if (p.p_type == PT_LOAD) last_load = phdrs.size();
    phdrs.push_back(p);
  }
  Elf64_Phdr load{};
  load.p_type = PT_LOAD;
  load.p_flags = PF_R;
  load.p_offset = plan.file_offset;
  load.p_vaddr = load.p_paddr = plan.vaddr;
  load.p_filesz = load.p_memsz = segment_size;
  load.p_align = kPage;
  phdrs.insert(phdrs.begin() + static_cast<std::ptrdiff_t>(last_load + 1), load);
  if (!has_eh_frame_phdr(elf)) {
    if (hdr)
      phdrs.push_back(eh_frame_phdr());
    else { // keep the planned count: a null entry
      Elf64_Phdr none{};
      none.p_type = PT_NULL;
      phdrs.push_back(none);
    }
  }
  for (size_t i = 0; i < phdrs.size(); ++i)
    put(out, plan.file_offset + i * sizeof(Elf64_Phdr), phdrs[i]);
  for (const ImageSection& s : sections)
    if (!s.bytes.empty())
      std::memcpy(out.data() + plan.file_offset + (s.addr - plan.vaddr), s.bytes.data(),
                  s.bytes.size());

  // Section headers: the old ones, the new sections, and a section-name table holding the old
  // names and the new ones, all after the segment.
  std::string names;
  std::vector<Elf64_Shdr> shdrs;
  // Bounds by subtraction: a hostile offset near 2^64 must not wrap an addition back in range.
  const uint64_t file_size = elf.bytes().size();
  if (eh.e_shoff && eh.e_shnum && eh.e_shstrndx < eh.e_shnum && eh.e_shoff <= file_size &&
      eh.e_shnum * sizeof(Elf64_Shdr) <= file_size - eh.e_shoff) {
    for (size_t i = 0; i < eh.e_shnum; ++i) {
      Elf64_Shdr sh;
      std::memcpy(&sh, elf.bytes().data() + eh.e_shoff + i * sizeof sh, sizeof sh);
      shdrs.push_back(sh);
    }
    const Elf64_Shdr& strtab = shdrs[eh.e_shstrndx];
    if (strtab.sh_offset <= file_size && strtab.sh_size <= file_size - strtab.sh_offset)
      names.assign(reinterpret_cast<const char*>(elf.bytes().data()) + strtab.sh_offset,
                   strtab.sh_size);
  }
  if (shdrs.empty()) {
    shdrs.push_back({}); // the null section
    shdrs.push_back({});
    names.assign(1, '\0');
    shdrs.back().sh_name = static_cast<uint32_t>(names.size());
    names += ".shstrtab";
    names += '\0';
    shdrs.back().sh_type = SHT_STRTAB;
    eh.e_shstrndx = 1;
  }
  for (const ImageSection& s : sections) {
    Elf64_Shdr sh{};
    sh.sh_name = static_cast<uint32_t>(names.size());
    names += s.name;
    names += '\0';
    sh.sh_type = SHT_PROGBITS;
    sh.sh_flags = SHF_ALLOC;
    sh.sh_addr = s.addr;
    sh.sh_offset = plan.file_offset + (s.addr - plan.vaddr);
    sh.sh_size = s.bytes.size();
    sh.sh_addralign = s.align;
    shdrs.push_back(sh);
  }
  const uint64_t names_offset = out.size();
  out.insert(out.end(), names.begin(), names.end());
  shdrs[eh.e_shstrndx].sh_offset = names_offset;
  shdrs[eh.e_shstrndx].sh_size = names.size();
  const uint64_t shoff = align_up(out.size(), 8);
  out.resize(shoff + shdrs.size() * sizeof(Elf64_Shdr), 0);
  for (size_t i = 0; i < shdrs.size(); ++i)
    put(out, shoff + i * sizeof(Elf64_Shdr), shdrs[i]);

  eh.e_phoff = plan.file_offset;
  eh.e_phnum = static_cast<uint16_t>(phdrs.size());
  eh.e_shoff = shoff;
  eh.e_shnum = static_cast<uint16_t>(shdrs.size());
  put(out, 0, eh);
  return out;
}

} // namespace ehelf
