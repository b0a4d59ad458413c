#include "eh_elf/eh_elf_check.hpp"

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <fmt/format.h>
#include <optional>
#include <string_view>
#include <vector>

#include "ehelf/eh_elf.h"
#include "elf/elf_file.hpp"
#include "support/safe_text.hpp"

namespace ehelf {
namespace {

// Bounds on what a compiled object needs: far above any real one, small enough that a hostile
// header cannot make the check itself slow.
constexpr unsigned kMaxProgramHeaders = 16;
constexpr uint64_t kMaxSymbols = 1024;
constexpr uint64_t kMaxHashBuckets = 1 << 16;

Error refuse(std::string what) {
  return Error::plain("not an eh_elf as ehelf compiles them: " + std::move(what));
}

template <class T> bool read_at(std::span<const uint8_t> b, uint64_t off, T& out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(&out, b.data() + off, sizeof(T));
  return true;
}

// The object as the loader maps it: PT_LOAD segments, sorted, not overlapping.
struct Image {
  std::span<const uint8_t> file;
  std::vector<Elf64_Phdr> loads;

  const Elf64_Phdr* load_of(uint64_t vaddr, uint64_t size) const {
    for (const Elf64_Phdr& p : loads)
      if (vaddr >= p.p_vaddr && vaddr - p.p_vaddr <= p.p_memsz &&
          size <= p.p_memsz - (vaddr - p.p_vaddr))
        return &p;
    return nullptr;
  }
  // The file bytes the loader maps at [vaddr, vaddr + size), if they all come from the file.
  std::optional<std::span<const uint8_t>> bytes_at(uint64_t vaddr, uint64_t size) const {
    const Elf64_Phdr* p = load_of(vaddr, size);
    if (!p || vaddr - p->p_vaddr > p->p_filesz || size > p->p_filesz - (vaddr - p->p_vaddr))
      return std::nullopt;
    return file.subspan(p->p_offset + (vaddr - p->p_vaddr), size);
  }
  template <class T> std::optional<T> read(uint64_t vaddr) const {
    auto b = bytes_at(vaddr, sizeof(T));
    if (!b) return std::nullopt;
    T v;
    std::memcpy(&v, b->data(), sizeof(T));
    return v;
  }
};

std::string tag_name(int64_t tag) {
  switch (tag) {
  case DT_NEEDED:
    return "DT_NEEDED";
  case DT_INIT:
    return "DT_INIT";
  case DT_FINI:
    return "DT_FINI";
  case DT_INIT_ARRAY:
    return "DT_INIT_ARRAY";
  case DT_FINI_ARRAY:
    return "DT_FINI_ARRAY";
  case DT_PREINIT_ARRAY:
    return "DT_PREINIT_ARRAY";
  case DT_TEXTREL:
    return "DT_TEXTREL";
  case DT_JMPREL:
    return "DT_JMPREL";
  case DT_REL:
    return "DT_REL";
  case DT_SONAME:
    return "DT_SONAME";
  case DT_RPATH:
    return "DT_RPATH";
  case DT_RUNPATH:
    return "DT_RUNPATH";
  case DT_AUDIT:
    return "DT_AUDIT";
  case DT_DEPAUDIT:
    return "DT_DEPAUDIT";
  case DT_AUXILIARY:
    return "DT_AUXILIARY";
  case DT_FILTER:
    return "DT_FILTER";
  default:
    return fmt::format("{:#x}", static_cast<uint64_t>(tag));
  }
}

Status check_program_headers(const Elf64_Ehdr& eh, Image& image, Elf64_Phdr& dynamic) {
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > kMaxProgramHeaders)
    return refuse(fmt::format("{} program headers of {} bytes", eh.e_phnum, eh.e_phentsize));
  bool has_dynamic = false, has_stack = false, has_code = false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr p;
    if (!read_at(image.file, eh.e_phoff + uint64_t(i) * sizeof p, p))
      return refuse("program headers past the end of the file");
    switch (p.p_type) {
    case PT_LOAD:
      if (p.p_offset > image.file.size() || p.p_filesz > image.file.size() - p.p_offset)
        return refuse(
            fmt::format("segment at file offset {:#x} runs past the end of the file", p.p_offset));
      if (p.p_filesz > p.p_memsz || p.p_vaddr > UINT64_MAX - p.p_memsz)
        return refuse(fmt::format("segment at {:#x} has impossible sizes", p.p_vaddr));
      if ((p.p_flags & PF_W) && (p.p_flags & PF_X))
        return refuse(fmt::format("segment at {:#x} is writable and executable", p.p_vaddr));
      // Sorted and disjoint; a shared page must come from the same file page (else the later
      // mapping would replace bytes the check read for the earlier one).
      if (!image.loads.empty()) {
        const Elf64_Phdr& q = image.loads.back();
        bool shares_page = ((q.p_vaddr + q.p_memsz + 0xfff) & ~uint64_t(0xfff)) > p.p_vaddr;
        if (p.p_vaddr < q.p_vaddr + q.p_memsz ||
            (shares_page && p.p_vaddr - p.p_offset != q.p_vaddr - q.p_offset))
          return refuse(fmt::format("segment at {:#x} overlaps the one before", p.p_vaddr));
      }
      has_code |= (p.p_flags & PF_X) != 0;
      image.loads.push_back(p);
      break;
    case PT_DYNAMIC:
      if (has_dynamic) return refuse("two PT_DYNAMIC headers");
      has_dynamic = true;
      dynamic = p;
      break;
    case PT_GNU_STACK:
      if (p.p_flags & PF_X) return refuse("it asks for an executable stack");
      has_stack = true;
      break;
    case PT_NOTE:
    case PT_GNU_EH_FRAME:
    case PT_GNU_RELRO:
    case PT_GNU_PROPERTY:
      break;
    default:
      return refuse(fmt::format("program header type {:#x}", p.p_type));
    }
  }
  if (!has_dynamic) return refuse("no PT_DYNAMIC");
  if (!has_stack) return refuse("no PT_GNU_STACK (the stack would become executable)");
  if (!has_code) return refuse("no executable segment");
  return Ok{};
}

struct Dynamic {
  std::optional<uint64_t> value[DT_NUM];
  std::optional<uint64_t> gnu_hash;
};

Result<Dynamic> read_dynamic(const Image& image, const Elf64_Phdr& ph) {
  Dynamic d;
  bool seen_count = false, seen_flags = false, seen_flags_1 = false, seen_gnu_hash = false;
  for (uint64_t at = 0;; at += sizeof(Elf64_Dyn)) {
    auto e = at + sizeof(Elf64_Dyn) <= ph.p_filesz ? image.read<Elf64_Dyn>(ph.p_vaddr + at)
                                                   : std::nullopt;
    if (!e) return refuse("the dynamic section has no DT_NULL inside its segment");
    int64_t tag = e->d_tag;
    uint64_t v = e->d_un.d_val;
    if (tag == DT_NULL) return d;
    bool* seen = nullptr;
    switch (tag) {
    case DT_HASH:
    case DT_STRTAB:
    case DT_SYMTAB:
    case DT_STRSZ:
    case DT_SYMENT:
    case DT_RELA:
    case DT_RELASZ:
    case DT_RELAENT:
      if (d.value[tag]) return refuse(fmt::format("dynamic tag {} twice", tag));
      d.value[tag] = v;
      continue;
    case DT_GNU_HASH:
      seen = &seen_gnu_hash;
      d.gnu_hash = v;
      break;
    case DT_RELACOUNT:
      seen = &seen_count;
      break;
    case DT_FLAGS:
      if (v & ~uint64_t(DF_BIND_NOW)) return refuse(fmt::format("DT_FLAGS {:#x}", v));
      seen = &seen_flags;
      break;
    case DT_FLAGS_1:
      if (v & ~uint64_t(DF_1_NOW)) return refuse(fmt::format("DT_FLAGS_1 {:#x}", v));
      seen = &seen_flags_1;
      break;
    default:
      return refuse("dynamic tag " + tag_name(tag));
    }
    if (*seen) return refuse(fmt::format("dynamic tag {:#x} twice", tag));
    *seen = true;
  }
}

Status check_relocations(const Image& image, const Dynamic& d) {
  if (!d.value[DT_RELA]) {
    if (d.value[DT_RELASZ] || d.value[DT_RELAENT]) return refuse("DT_RELASZ without DT_RELA");
    return Ok{};
  }
  if (!d.value[DT_RELASZ] || d.value[DT_RELAENT].value_or(0) != sizeof(Elf64_Rela))
    return refuse("DT_RELA without DT_RELASZ, or entries that are not Elf64_Rela");
  uint64_t size = *d.value[DT_RELASZ];
  if (size % sizeof(Elf64_Rela) || !image.bytes_at(*d.value[DT_RELA], size))
    return refuse("relocations outside the file");
  uint64_t image_end = image.loads.back().p_vaddr + image.loads.back().p_memsz;
  for (uint64_t at = 0; at < size; at += sizeof(Elf64_Rela)) {
    auto r = *image.read<Elf64_Rela>(*d.value[DT_RELA] + at);
    if (ELF64_R_TYPE(r.r_info) != R_X86_64_RELATIVE || ELF64_R_SYM(r.r_info) != 0)
      return refuse(fmt::format("relocation type {} against symbol {} (only R_X86_64_RELATIVE)",
                                ELF64_R_TYPE(r.r_info), ELF64_R_SYM(r.r_info)));
    const Elf64_Phdr* p = image.load_of(r.r_offset, 8);
    if (!p || !(p->p_flags & PF_W))
      return refuse(fmt::format("relocation at {:#x} outside the writable segments", r.r_offset));
    if (r.r_addend < 0 || static_cast<uint64_t>(r.r_addend) > image_end)
      return refuse(fmt::format("relocation at {:#x} points outside the object", r.r_offset));
  }
  return Ok{};
}

// How many .dynsym entries the loader can reach through the hash tables.
Result<uint64_t> symbol_count(const Image& image, const Dynamic& d) {
  uint64_t n = 0;
  if (d.value[DT_HASH]) {
    auto nchain = image.read<uint32_t>(*d.value[DT_HASH] + 4);
    if (!nchain) return refuse("DT_HASH outside the file");
    n = *nchain;
  }
  if (d.gnu_hash) {
    uint64_t h = *d.gnu_hash;
    auto nbuckets = image.read<uint32_t>(h), symoffset = image.read<uint32_t>(h + 4),
         bloom = image.read<uint32_t>(h + 8);
    if (!nbuckets || !symoffset || !bloom || *nbuckets > kMaxHashBuckets ||
        *bloom > kMaxHashBuckets)
      return refuse("DT_GNU_HASH header outside the file or too large");
    uint64_t buckets = h + 16 + uint64_t(*bloom) * 8, chains = buckets + uint64_t(*nbuckets) * 4;
    uint64_t last = 0;
    for (uint32_t b = 0; b < *nbuckets; ++b) {
      auto v = image.read<uint32_t>(buckets + uint64_t(b) * 4);
      if (!v) return refuse("DT_GNU_HASH buckets outside the file");
      last = std::max<uint64_t>(last, *v);
    }
    uint64_t count = *symoffset;
    if (last >= *symoffset) {
      for (uint64_t i = last;; ++i) { // a chain ends at an entry with its low bit set
        auto c = i - *symoffset < kMaxSymbols ? image.read<uint32_t>(chains + (i - *symoffset) * 4)
                                              : std::nullopt;
        if (!c) return refuse("DT_GNU_HASH chains outside the file or too long");
        if (*c & 1) {
          count = i + 1;
          break;
        }
      }
    }
    n = std::max(n, count);
  }
  if (!d.value[DT_HASH] && !d.gnu_hash) return refuse("no symbol hash table");
  if (n > kMaxSymbols) return refuse(fmt::format("{} dynamic symbols", n));
  return n;
}

Status check_symbols(const Image& image, const Dynamic& d) {
  if (!d.value[DT_SYMTAB] || !d.value[DT_STRTAB] || !d.value[DT_STRSZ])
    return refuse("no dynamic symbol table");
  if (d.value[DT_SYMENT].value_or(sizeof(Elf64_Sym)) != sizeof(Elf64_Sym))
    return refuse("dynamic symbols that are not Elf64_Sym");
  auto n = symbol_count(image, d);
  if (!n) return std::move(n).error();
  auto strtab = image.bytes_at(*d.value[DT_STRTAB], *d.value[DT_STRSZ]);
  if (!strtab) return refuse("DT_STRTAB outside the file");
  const std::string_view wanted[] = {EHELF_INFO_SYMBOL, EHELF_UNWIND_LOCAL_SYMBOL,
                                     EHELF_UNWIND_REMOTE_SYMBOL};
  bool found[3] = {};
  for (uint64_t i = 1; i < *n; ++i) {
    auto s = image.read<Elf64_Sym>(*d.value[DT_SYMTAB] + i * sizeof(Elf64_Sym));
    if (!s) return refuse("dynamic symbols outside the file");
    std::string_view name;
    if (s->st_name < strtab->size()) {
      auto rest = strtab->subspan(s->st_name);
      const void* nul = std::memchr(rest.data(), 0, rest.size());
      if (nul)
        name = {reinterpret_cast<const char*>(rest.data()),
                static_cast<size_t>(static_cast<const uint8_t*>(nul) - rest.data())};
    }
    auto k = std::find(std::begin(wanted), std::end(wanted), name) - std::begin(wanted);
    if (k == 3 || found[k]) return refuse("exports symbol " + comment_safe(name));
    found[k] = true;
    bool object = k == 0;
    const Elf64_Phdr* p = image.load_of(s->st_value, s->st_size);
    if (s->st_shndx == SHN_UNDEF || s->st_shndx >= SHN_LORESERVE ||
        ELF64_ST_BIND(s->st_info) != STB_GLOBAL ||
        ELF64_ST_TYPE(s->st_info) != (object ? STT_OBJECT : STT_FUNC) || !p ||
        ((p->p_flags & PF_X) != 0) == object)
      return refuse("symbol " + std::string(name) + " is not defined as ehelf defines it");
  }
  for (int k = 0; k < 3; ++k)
    if (!found[k]) return refuse("does not export " + std::string(wanted[k]));
  return Ok{};
}

// The section names of a compiled object; sections are not what the loader reads, but a stray
// .init_array or .ctors says the object was not made by ehelf.
Status check_sections(std::span<const uint8_t> bytes) {
  static constexpr std::string_view kAllowed[] = {"",
                                                  ".note.gnu.build-id",
                                                  ".note.gnu.property",
                                                  ".hash",
                                                  ".gnu.hash",
                                                  ".dynsym",
                                                  ".dynstr",
                                                  ".rela.dyn",
                                                  ".text",
                                                  ".rodata",
                                                  ".eh_frame_hdr",
                                                  ".eh_frame",
                                                  ".data.rel.ro",
                                                  ".dynamic",
                                                  ".got",
                                                  ".data",
                                                  ".bss",
                                                  ".comment",
                                                  ".symtab",
                                                  ".strtab",
                                                  ".shstrtab"};
  auto elf = ElfFile::parse(bytes, "eh_elf");
  if (!elf) return refuse(elf.error().message);
  for (const Section& s : (*elf)->sections())
    if (std::find(std::begin(kAllowed), std::end(kAllowed), s.name) == std::end(kAllowed))
      return refuse("section " + comment_safe(s.name));
  return Ok{};
}

} // namespace

Status check_eh_elf_image(std::span<const uint8_t> bytes) {
  Elf64_Ehdr eh;
  if (!read_at(bytes, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return refuse("not an ELF file, or truncated");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_type != ET_DYN || eh.e_machine != EM_X86_64)
    return refuse("not an x86_64 ELF64 shared object");
  Image image{bytes, {}};
  Elf64_Phdr dynamic{};
  if (auto st = check_program_headers(eh, image, dynamic); !st) return st;
  auto d = read_dynamic(image, dynamic);
  if (!d) return std::move(d).error();
  if (auto st = check_relocations(image, *d); !st) return st;
  if (auto st = check_symbols(image, *d); !st) return st;
  return check_sections(bytes);
}

} // namespace ehelf
