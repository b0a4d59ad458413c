#include "elf/elf_file.hpp"
#include "elf/notes.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <elf.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include "elf/plt_entries.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf {
namespace {

// Decompressed bytes held per file, all sections together: a hostile header can claim any size,
// and a small file can hold many sections that each expand 1000-fold (four of them once made
// ehelf hold 2.1 GB for a 137 KB file). Real .debug_frame sections are a few MiB.
constexpr uint64_t kMaxDecompressedPerFile = uint64_t(256) << 20;

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return path.substr(0, slash == 0 ? 1 : slash);
}

} // namespace

bool Section::compressed() const {
  return (flags & SHF_COMPRESSED) != 0;
}

Result<std::unique_ptr<ElfFile>> ElfFile::open(const std::string& path, HeaderFaults faults) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return std::move(mapped).error();
  std::unique_ptr<ElfFile> f(new ElfFile);
  f->mapping_ = std::move(*mapped);
  f->bytes_ = f->mapping_->bytes();
  f->name_ = path;
  if (auto st = f->parse_headers(faults); !st) return std::move(st).error().in_file(path);
  return f;
}

Result<std::unique_ptr<ElfFile>> ElfFile::parse(std::span<const uint8_t> bytes, std::string name,
                                                HeaderFaults faults) {
  std::unique_ptr<ElfFile> f(new ElfFile);
  f->bytes_ = bytes;
  f->name_ = std::move(name);
  if (auto st = f->parse_headers(faults); !st) return std::move(st).error().in_file(f->name_);
  return f;
}

Status ElfFile::parse_headers(HeaderFaults faults) {
  ByteCursor c(bytes_);
  auto ident = c.bytes(EI_NIDENT);
  if (!c.ok() || std::memcmp(ident.data(), ELFMAG, SELFMAG) != 0)
    return Error::plain("not an ELF file");
  if (ident[EI_CLASS] != ELFCLASS64)
    return Error::plain(ident[EI_CLASS] == ELFCLASS32 ? "32-bit ELF is not supported (ELF64 only)"
                                                      : "unknown ELF class");
  if (ident[EI_DATA] != ELFDATA2LSB) return Error::plain("big-endian ELF is not supported");
  e_type_ = c.u16();
  uint16_t machine = c.u16();
  if (machine != EM_X86_64)
    return Error::plain(fmt::format("ELF machine {} is not x86_64", machine));
  c.u32(); // e_version
  e_entry_ = c.u64();
  uint64_t phoff = c.u64();
  uint64_t shoff = c.u64();
  c.u32(); // e_flags
  c.u16(); // e_ehsize
  uint16_t phentsize = c.u16();
  uint16_t phnum = c.u16();
  uint16_t shentsize = c.u16();
  uint64_t shnum = c.u16();
  uint32_t shstrndx = c.u16();
  if (!c.ok()) return Error::plain("truncated ELF header");

  // A table that cannot be read is refused, or (Tolerate) left empty with the first reason kept.
  auto fault = [&](Status st, auto& table) -> Status {
    if (st || faults == HeaderFaults::Refuse) return st;
    table.clear();
    if (!header_error_) header_error_ = std::move(st).error().in_file(name_);
    return Ok{};
  };
  if (phnum && phoff)
    if (auto st = fault(parse_program_headers(phoff, phentsize, phnum), segments_); !st) return st;
  if (shoff == 0) return Ok{};
  // readelf reads entries of the standard size, whatever a larger e_shentsize says.
  uint16_t stride = faults == HeaderFaults::Tolerate && shentsize > sizeof(Elf64_Shdr)
                        ? uint16_t{sizeof(Elf64_Shdr)}
                        : shentsize;
  return fault(parse_section_headers(shoff, shentsize, stride, shnum, shstrndx), sections_);
}

Status ElfFile::parse_program_headers(uint64_t phoff, uint16_t phentsize, uint16_t phnum) {
  if (phentsize < sizeof(Elf64_Phdr))
    return Error::at("", phoff, "program header entry size too small");
  for (uint32_t i = 0; i < phnum; ++i) {
    ByteCursor p(bytes_);
    p.seek(phoff);
    p.skip(uint64_t(i) * phentsize);
    Segment s;
    s.type = p.u32();
    s.flags = p.u32();
    s.offset = p.u64();
    s.vaddr = p.u64();
    p.u64(); // paddr
    s.filesz = p.u64();
    s.memsz = p.u64();
    if (!p.ok()) return Error::at("", phoff, "program headers extend past the end of the file");
    segments_.push_back(s);
  }
  return Ok{};
}

Status ElfFile::parse_section_headers(uint64_t shoff, uint16_t shentsize, uint16_t stride,
                                      uint64_t shnum, uint32_t shstrndx) {
  if (shentsize < sizeof(Elf64_Shdr))
    return Error::at("", shoff, "section header entry size too small");
  auto read_shdr = [&](uint64_t i, Section& s) {
    ByteCursor p(bytes_);
    p.seek(shoff);
    p.skip(i * stride);
    uint32_t name = p.u32();
    s.type = p.u32();
    s.flags = p.u64();
    s.addr = p.u64();
    s.offset = p.u64();
    s.size = p.u64();
    s.link = p.u32();
    s.info = p.u32();
    p.u64(); // addralign
    s.entsize = p.u64();
    s.index = static_cast<uint32_t>(i);
    s.name = std::string_view(); // resolved below
    return std::pair<bool, uint32_t>(p.ok(), name);
  };
  Section first;
  auto [ok0, ignored] = read_shdr(0, first);
  (void)ignored;
  if (!ok0) return Error::at("", shoff, "section headers extend past the end of the file");
  if (shnum == 0) shnum = first.size; // extended numbering
  if (shstrndx == SHN_XINDEX) shstrndx = first.link;
  if (shnum > bytes_.size() / shentsize || shoff > bytes_.size() - shnum * shentsize)
    return Error::at("", shoff, "section header count exceeds the file size");

  std::vector<uint32_t> name_offsets;
  sections_.resize(shnum);
  for (uint64_t i = 0; i < shnum; ++i) {
    auto [ok, name] = read_shdr(i, sections_[i]);
    if (!ok) return Error::at("", shoff + i * stride, "section header extends past the end");
    name_offsets.push_back(name);
  }
  if (shstrndx < shnum) {
    const Section& strtab = sections_[shstrndx];
    // The names are read whatever the table's type claims, as readelf and the loader read them
    // (a NOBITS .shstrtab still names the sections).
    if (strtab.offset <= bytes_.size() && strtab.size <= bytes_.size() - strtab.offset) {
      auto names = bytes_.subspan(strtab.offset, strtab.size);
      for (uint64_t i = 0; i < shnum; ++i) {
        ByteCursor n(names);
        n.seek(name_offsets[i]);
        auto s = n.cstring();
        if (n.ok()) sections_[i].name = s;
      }
    }
  }
  return Ok{};
}

const Section* ElfFile::find_section(std::string_view name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

Result<std::span<const uint8_t>> ElfFile::section_data(const Section& s) const {
  std::string sec(s.name);
  if (s.type == SHT_NOBITS) return Error::at(sec, 0, "section has no data in the file (NOBITS)");
  if (s.offset > bytes_.size() || s.size > bytes_.size() - s.offset)
    return Error::at(sec, 0,
                     fmt::format("section data [{:#x}, +{:#x}) lies outside the file (size {:#x})",
                                 s.offset, s.size, bytes_.size()));
  auto raw = bytes_.subspan(s.offset, s.size);
  if (!s.compressed()) return raw;

  for (auto& [idx, slot] : decompressed_index_)
    if (idx == s.index) return std::span<const uint8_t>(decompressed_[slot]);

  ByteCursor c(raw);
  uint32_t ch_type = c.u32();
  c.u32(); // reserved
  uint64_t ch_size = c.u64();
  c.u64(); // addralign
  if (!c.ok()) return Error::at(sec, 0, "truncated compression header");
  return inflate(s, ch_type, ch_size, raw.subspan(c.pos()), c.pos());
}

Result<std::span<const uint8_t>> ElfFile::inflate(const Section& s, uint32_t type, uint64_t size,
                                                  std::span<const uint8_t> payload,
                                                  uint64_t payload_offset) const {
  std::string sec(s.name);
  if (size > kMaxDecompressedPerFile - decompressed_bytes_)
    return Error::at(sec, 0,
                     fmt::format("decompressing {:#x} more bytes would pass the limit of {} MiB "
                                 "per file ({:#x} already)",
                                 size, kMaxDecompressedPerFile >> 20, decompressed_bytes_));
  // A hostile header can claim any size: refuse sizes the payload cannot expand to before
  // allocating (deflate expands at most 1032:1; zstd's densest blocks about 32768:1).
  uint64_t ratio = type == ELFCOMPRESS_ZLIB ? 1032 : 32768;
  if (size > uint64_t(payload.size()) * ratio + 4096)
    return Error::at(sec, 0,
                     fmt::format("claimed decompressed size {:#x} is impossible for {:#x} "
                                 "compressed bytes",
                                 size, payload.size()));
  if (type == 2 /* ELFCOMPRESS_ZSTD */) {
    unsigned long long frame = ZSTD_getFrameContentSize(payload.data(), payload.size());
    if (frame != ZSTD_CONTENTSIZE_UNKNOWN && frame != size)
      return Error::at(
          sec, payload_offset,
          fmt::format("zstd frame holds {:#x} bytes, the header claims {:#x}", frame, size));
  }
  std::vector<uint8_t> out(size);
  if (type == ELFCOMPRESS_ZLIB) {
    uLongf dest_len = static_cast<uLongf>(size);
    int rc = ::uncompress(out.data(), &dest_len, payload.data(), payload.size());
    if (rc != Z_OK || dest_len != size)
      return Error::at(sec, payload_offset, fmt::format("zlib decompression failed ({})", rc));
  } else if (type == 2 /* ELFCOMPRESS_ZSTD */) {
    size_t n = ZSTD_decompress(out.data(), out.size(), payload.data(), payload.size());
    if (ZSTD_isError(n) || n != size)
      return Error::at(sec, payload_offset,
                       fmt::format("zstd decompression failed: {}",
                                   ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch"));
  } else {
    return Error::at(sec, 0, fmt::format("unknown compression type {}", type));
  }
  decompressed_bytes_ += size;
  decompressed_.push_back(std::move(out));
  decompressed_index_.emplace_back(s.index, decompressed_.size() - 1);
  return std::span<const uint8_t>(decompressed_.back());
}

Result<std::span<const uint8_t>> ElfFile::relocated_section_data(const Section& s) const {
  auto data = section_data(s);
  // The old GNU compression (.zdebug_*): "ZLIB", the size in big-endian, a zlib stream; readelf
  // undoes it whatever the section's name.
  if (data && !s.compressed() && data->size() >= 12 && std::memcmp(data->data(), "ZLIB", 4) == 0) {
    bool cached = false;
    for (auto& [idx, slot] : decompressed_index_)
      if (idx == s.index) {
        data = std::span<const uint8_t>(decompressed_[slot]);
        cached = true;
      }
    if (!cached) {
      uint64_t size = 0;
      for (unsigned i = 4; i < 12; ++i)
        size = size << 8 | (*data)[i];
      data = inflate(s, ELFCOMPRESS_ZLIB, size, data->subspan(12), 12);
    }
  }
  if (!data || e_type_ != ET_REL) return data;
  for (auto& [idx, slot] : relocated_index_)
    if (idx == s.index) return std::span<const uint8_t>(decompressed_[slot]);
  std::vector<uint8_t> out(data->begin(), data->end());
  // Only the first relocation section for `s` counts, as in readelf's apply_relocations.
  for (const Section& rel : sections_) {
    if ((rel.type != SHT_RELA && rel.type != SHT_REL) || rel.info != s.index || rel.size == 0 ||
        rel.link >= sections_.size())
      continue;
    const Section& symsec = sections_[rel.link];
    if (symsec.type != SHT_SYMTAB && symsec.type != SHT_DYNSYM)
      return Error::at(std::string(rel.name), 0,
                       fmt::format("the relocations' symbol table (section {}) is of type {:#x}",
                                   rel.link, symsec.type));
    auto relocs = section_data(rel);
    if (!relocs) return std::move(relocs).error(); // as readelf, which then shows nothing
    auto symtab = section_data(symsec);
    if (!symtab) break; // readelf shows the section unrelocated
    const uint64_t num_syms = symtab->size() / sizeof(Elf64_Sym);
    bool rela = rel.type == SHT_RELA;
    ByteCursor c(*relocs);
    while (c.remaining() >= (rela ? 24u : 16u)) {
      uint64_t where = c.u64();
      uint64_t info = c.u64();
      int64_t addend = rela ? c.s64() : 0;
      uint32_t type = static_cast<uint32_t>(info);
      uint64_t sym_index = info >> 32;
      unsigned size = 0;
      bool pcrel = false;
      switch (type) {
      case R_X86_64_64:
        size = 8;
        break;
      case R_X86_64_PC32:
        size = 4;
        pcrel = true;
        break;
      case R_X86_64_32:
        size = 4;
        break;
      case R_X86_64_PC64:
        size = 8;
        pcrel = true;
        break;
      default:
        continue; // readelf leaves other types (R_X86_64_32S too) unapplied
      }
      if (sym_index >= num_syms || where > out.size() || out.size() - where < size) continue;
      Elf64_Sym sym;
      std::memcpy(&sym, symtab->data() + sym_index * sizeof(Elf64_Sym), sizeof sym);
      // readelf skips symbols of the types it does not expect (file, TLS, IFUNC...).
      unsigned sym_type = ELF64_ST_TYPE(sym.st_info);
      if (sym_index != 0 && sym_type > STT_SECTION && sym_type != STT_COMMON) continue;
      if (!rela) {
        if (size == 8)
          std::memcpy(&addend, out.data() + where, 8);
        else {
          int32_t a32;
          std::memcpy(&a32, out.data() + where, 4);
          addend = a32;
        }
      }
      uint64_t v = sym.st_value + static_cast<uint64_t>(addend) - (pcrel ? where : 0);
      std::memcpy(out.data() + where, &v, size); // little-endian: low bytes first
    }
    break;
  }
  decompressed_.push_back(std::move(out));
  relocated_index_.emplace_back(s.index, decompressed_.size() - 1);
  return std::span<const uint8_t>(decompressed_.back());
}

uint64_t ElfFile::load_base() const {
  uint64_t base = UINT64_MAX;
  for (const auto& seg : segments_)
    if (seg.type == PT_LOAD) base = std::min(base, seg.vaddr);
  return base == UINT64_MAX ? 0 : base;
}

std::optional<std::span<const uint8_t>> build_id_in_notes(std::span<const uint8_t> notes) {
  ByteCursor c(notes);
  while (c.remaining() >= 12) {
    uint32_t namesz = c.u32(), descsz = c.u32(), type = c.u32();
    auto name = c.bytes((uint64_t(namesz) + 3) & ~uint64_t(3));
    auto desc = c.bytes((uint64_t(descsz) + 3) & ~uint64_t(3));
    if (!c.ok()) break;
    if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(name.data(), "GNU", 4) == 0)
      return desc.first(descsz);
  }
  return std::nullopt;
}

std::optional<std::span<const uint8_t>> ElfFile::build_id() const {
  auto scan = build_id_in_notes;
  for (const auto& s : sections_)
    if (s.type == SHT_NOTE)
      if (auto d = section_data(s))
        if (auto id = scan(*d)) return id;
  for (const auto& seg : segments_)
    if (seg.type == PT_NOTE && seg.offset <= bytes_.size() &&
        seg.filesz <= bytes_.size() - seg.offset)
      if (auto id = scan(bytes_.subspan(seg.offset, seg.filesz))) return id;
  return std::nullopt;
}

std::string ElfFile::build_id_hex() const {
  std::string out;
  if (auto id = build_id())
    for (uint8_t b : *id)
      out += fmt::format("{:02x}", b);
  return out;
}

std::optional<DebugLink> ElfFile::debug_link() const {
  const Section* s = find_section(".gnu_debuglink");
  if (!s) return std::nullopt;
  auto data = section_data(*s);
  if (!data) return std::nullopt;
  ByteCursor c(*data);
  DebugLink link;
  link.file = std::string(c.cstring());
  c.seek((c.pos() + 3) & ~size_t(3));
  link.crc = c.u32();
  if (!c.ok() || link.file.empty()) return std::nullopt;
  return link;
}

const std::vector<Symbol>& ElfFile::symbols() const {
  if (symbols_loaded_) return symbols_;
  symbols_loaded_ = true;
  const Section* table = nullptr;
  for (const auto& s : sections_)
    if (s.type == SHT_SYMTAB) table = &s;
  if (!table)
    for (const auto& s : sections_)
      if (s.type == SHT_DYNSYM) table = &s;
  if (!table || table->link >= sections_.size()) return symbols_;
  auto syms = section_data(*table);
  auto strs = section_data(sections_[table->link]);
  if (!syms || !strs) return symbols_;
  ByteCursor c(*syms);
  while (c.remaining() >= sizeof(Elf64_Sym)) {
    uint32_t name = c.u32();
    uint8_t info = c.u8();
    c.u8(); // other
    uint16_t shndx = c.u16();
    uint64_t value = c.u64();
    uint64_t size = c.u64();
    uint8_t type = ELF64_ST_TYPE(info);
    uint8_t bind = ELF64_ST_BIND(info);
    if (shndx == SHN_UNDEF || value == 0) continue;
    if (type != STT_FUNC && type != STT_NOTYPE && type != STT_GNU_IFUNC) continue;
    ByteCursor n(*strs);
    n.seek(name);
    auto nm = n.cstring();
    if (!n.ok() || nm.empty()) continue;
    symbols_.push_back(Symbol{nm, value, size, type, bind});
  }
  // Aliases keep the table's order (the choice among them depends on it).
  std::stable_sort(symbols_.begin(), symbols_.end(),
                   [](const Symbol& a, const Symbol& b) { return a.value < b.value; });
  return symbols_;
}

namespace {

size_t leading_underscores(std::string_view name) {
  size_t n = 0;
  while (n < name.size() && name[n] == '_')
    ++n;
  return n;
}

int binding_rank(const Symbol& s) {
  return s.bind == STB_GLOBAL ? 3 : s.bind == STB_WEAK ? 2 : s.bind == STB_LOCAL ? 1 : 0;
}

// True if libdwfl keeps `a` over a later `b` (same address).
bool libdwfl_prefers(const Symbol& a, const Symbol& b) {
  if ((a.size > 0) != (b.size > 0)) return a.size > 0;
  return binding_rank(a) >= binding_rank(b);
}

// True if perf's choose_best_symbol keeps `a` over a later `b` (same address).
bool perf_prefers(const Symbol& a, const Symbol& b) {
  if ((a.size > 0) != (b.size > 0)) return a.size > 0;
  if ((a.bind == STB_WEAK) != (b.bind == STB_WEAK)) return b.bind == STB_WEAK;
  if ((a.bind == STB_GLOBAL) != (b.bind == STB_GLOBAL)) return a.bind == STB_GLOBAL;
  const size_t ua = leading_underscores(a.name), ub = leading_underscores(b.name);
  if (ua != ub) return ua < ub;
  if (a.name.size() != b.name.size()) return a.name.size() > b.name.size();
  return true; // the first one
}

} // namespace

const Symbol* ElfFile::symbol_for(uint64_t addr, AliasChoice choice) const {
  const auto& syms = symbols();
  auto it = std::upper_bound(syms.begin(), syms.end(), addr,
                             [](uint64_t a, const Symbol& s) { return a < s.value; });
  if (it == syms.begin()) return nullptr;
  // The aliases at the nearest address at or below addr: [group, it).
  const uint64_t at = std::prev(it)->value;
  auto group = std::prev(it);
  while (group != syms.begin() && std::prev(group)->value == at)
    --group;
  const Symbol* best = nullptr;
  for (auto s = group; s != it; ++s) {
    const bool holds = s->size == 0 || addr < s->value + s->size;
    if (!holds) continue;
    if (!best) {
      best = &*s;
    } else if (choice == AliasChoice::Perf ? !perf_prefers(*best, *s)
                                           : !libdwfl_prefers(*best, *s)) {
      best = &*s;
    }
  }
  return best;
}

const Symbol* ElfFile::plt_symbol_for(uint64_t addr) const {
  if (!plt_loaded_) {
    plt_loaded_ = true;
    const Section* rela = nullptr;
    for (const Section& sec : sections_)
      if (sec.name == ".rela.plt" && sec.type == SHT_RELA) rela = &sec;
    // The name of each slot .rela.plt binds: its symbol's, or "*ABS*+0xADDEND" for an IFUNC
    // the file resolves itself (R_X86_64_IRELATIVE, no symbol: libc's own), as objdump names
    // them. The entries are not in .rela.plt's order (libc lists its IRELATIVE ones last), and
    // .plt.got's slots are bound elsewhere (.rela.dyn): only entries of .plt and .plt.sec match.
    std::vector<std::pair<uint64_t, std::string>> slots;
    if (rela && rela->link < sections_.size()) {
      const Section& dynsym = sections_[rela->link];
      auto relocs = section_data(*rela);
      auto syms = section_data(dynsym);
      std::span<const uint8_t> strs;
      if (dynsym.link < sections_.size())
        if (auto d = section_data(sections_[dynsym.link])) strs = *d;
      if (relocs && syms) {
        ByteCursor c(*relocs);
        while (c.remaining() >= sizeof(Elf64_Rela)) {
          const uint64_t offset = c.u64();
          const uint64_t info = c.u64();
          const uint64_t addend = c.u64();
          if (ELF64_R_TYPE(info) == R_X86_64_IRELATIVE) {
            slots.emplace_back(offset, fmt::format("*ABS*+{:#x}", addend));
            continue;
          }
          ByteCursor sym(*syms);
          sym.seek(ELF64_R_SYM(info) * sizeof(Elf64_Sym));
          const uint32_t name = sym.u32();
          ByteCursor n(strs);
          n.seek(name);
          const std::string_view nm = n.cstring();
          if (ELF64_R_SYM(info) == 0 || !sym.ok() || !n.ok() || nm.empty()) continue;
          slots.emplace_back(offset, std::string(nm));
        }
      }
      std::sort(slots.begin(), slots.end());
    }
    for (const PltEntry& e : plt_entries(*this)) {
      auto found = std::lower_bound(slots.begin(), slots.end(), e.slot,
                                    [](const auto& s, uint64_t v) { return s.first < v; });
      if (found == slots.end() || found->first != e.slot) continue;
      const std::string& owned = plt_names_.emplace_back(found->second + "@plt");
      plt_symbols_.push_back(Symbol{owned, e.address, e.size, STT_FUNC, STB_LOCAL});
    }
  }
  auto it = std::upper_bound(plt_symbols_.begin(), plt_symbols_.end(), addr,
                             [](uint64_t a, const Symbol& s) { return a < s.value; });
  if (it == plt_symbols_.begin()) return nullptr;
  --it;
  return addr < it->value + it->size ? &*it : nullptr;
}

std::string ElfFile::find_debug_file(std::span<const std::string> debug_dirs) const {
  std::string id = build_id_hex();
  if (id.size() > 2)
    for (const std::string& root : debug_dirs) {
      std::string p = root + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
      if (file_exists(p)) return p;
    }
  if (auto link = debug_link()) {
    std::string dir = dir_of(name_);
    std::vector<std::string> places{dir + "/" + link->file, dir + "/.debug/" + link->file};
    for (const std::string& root : debug_dirs)
      places.push_back(root + dir + "/" + link->file);
    for (const std::string& p : places)
      if (p != name_ && file_exists(p)) return p;
  }
  return {};
}

} // namespace ehelf
