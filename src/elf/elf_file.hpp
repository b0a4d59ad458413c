// ElfFile: a parsed, bounds-checked view of one ELF64 little-endian x86_64 file.
//
// Gives sections (decompressing SHF_COMPRESSED ones on demand), program headers, symbols,
// the GNU build-id and .gnu_debuglink. All spans point into the mapping or into buffers owned
// by the ElfFile, so they live as long as it does.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elf/mapped_file.hpp"
#include "support/result.hpp"

namespace ehelf {

struct Section {
  std::string_view name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;   // SVMA of the section's first byte
  uint64_t offset = 0; // file offset
  uint64_t size = 0;   // size in the file (compressed size if SHF_COMPRESSED)
  uint32_t link = 0;
  uint32_t info = 0;
  uint64_t entsize = 0;
  uint32_t index = 0;
  bool compressed() const;
};

struct Segment {
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
};

struct Symbol {
  std::string_view name;
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t type = 0; // STT_*
  uint8_t bind = 0; // STB_*
};

// Which of several symbols at one address (aliases) names it.
enum class AliasChoice {
  // libdwfl's (eu-stack's): a sized one, then the strongest binding (global, weak, local),
  // then the first in the table, so that `ehelf stack` names frames as eu-stack does.
  Libdwfl,
  // perf's choose_best_symbol: a sized one, then not weak, then global, then fewer leading
  // underscores, then the longest name, then the first in the table (`__GI___qsort_r` over
  // `__qsort_r` and `qsort_r`; `__libc_start_main@@GLIBC_2.34` over `__libc_start_main_impl`).
  Perf,
};

// Where the system keeps separate debug files (gdb's default debug-file-directory).
inline const std::string kSystemDebugDir = "/usr/lib/debug";

struct DebugLink {
  std::string file;
  uint32_t crc = 0;
};

class ElfFile {
public:
  // What to do with a program or section header table that cannot be read (past the end of the
  // file, an entry size too small, a count the file cannot hold).
  enum class HeaderFaults {
    Refuse,   // the file is refused
    Tolerate, // readelf's way: the file has no segments or no sections, header_error() says why;
              // section headers are read 64 bytes apart even if e_shentsize says more
  };
  // Maps and parses `path`. Errors name the file.
  static Result<std::unique_ptr<ElfFile>> open(const std::string& path,
                                               HeaderFaults faults = HeaderFaults::Refuse);
  // Parses bytes the caller keeps alive (fuzzing, in-memory images).
  static Result<std::unique_ptr<ElfFile>> parse(std::span<const uint8_t> bytes, std::string name,
                                                HeaderFaults faults = HeaderFaults::Refuse);

  const std::string& name() const { return name_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  // Ok, or the one-line error naming the file if it was truncated while mapped (reads past the
  // new end gave zeros; see MappedFile).
  Status check_intact() const { return mapping_ ? mapping_->check_intact() : Status(Ok{}); }
  uint16_t type() const { return e_type_; }   // ET_EXEC, ET_DYN, ...
  uint64_t entry() const { return e_entry_; } // e_entry: the entry point's SVMA (0: none)
  const std::vector<Section>& sections() const { return sections_; }
  // Why headers were not read (opened with HeaderFaults::Tolerate), if some were not.
  const std::optional<Error>& header_error() const { return header_error_; }
  const std::vector<Segment>& segments() const { return segments_; }

  const Section* find_section(std::string_view name) const;
  // The section's contents, decompressed if needed; NOBITS sections are an error.
  Result<std::span<const uint8_t>> section_data(const Section& s) const;

  // For relocatable (ET_REL) files: the section's contents with its SHT_RELA/SHT_REL relocations
  // applied the way readelf applies them to debug sections (symbol value + addend, minus the
  // place for PC-relative types; only R_X86_64_64/32/PC32/PC64; only the first relocation
  // section for it; an error when that one's symbol table is no symbol table). Other files:
  // same as section_data. Both undo the old GNU "ZLIB" compression first, as readelf does.
  Result<std::span<const uint8_t>> relocated_section_data(const Section& s) const;

  // Lowest p_vaddr of PT_LOAD segments (the module's link-time base); 0 if none.
  uint64_t load_base() const;

  std::optional<std::span<const uint8_t>> build_id() const;
  std::string build_id_hex() const; // empty if none
  std::optional<DebugLink> debug_link() const;

  // .symtab if present, else .dynsym; FUNC and NOTYPE symbols with a value, sorted by address
  // (aliases in the table's order).
  const std::vector<Symbol>& symbols() const;
  // The symbol containing addr (or the nearest below it when sizes are 0), among aliases the
  // one `choice` prefers.
  const Symbol* symbol_for(uint64_t addr, AliasChoice choice = AliasChoice::Libdwfl) const;

  // The PLT entry holding addr, named as objdump and perf name it ("memmove@plt": the symbol of
  // the relocation that binds the GOT slot the entry jumps through; "*ABS*+0x9f550@plt" for an
  // IFUNC the file resolves itself, as libc's own), or null. Entries are those of .plt.sec when
  // the file has one (IBT), else those of .plt after its first entry.
  const Symbol* plt_symbol_for(uint64_t addr) const;

  // Separate debug file: DIR/.build-id/xx/rest.debug for each of `debug_dirs` in order, then
  // .gnu_debuglink places (beside the file, in its .debug/, then under each DIR). Returns an
  // empty string if none exists.
  std::string find_debug_file(std::span<const std::string> debug_dirs) const;
  std::string find_debug_file() const { return find_debug_file({&kSystemDebugDir, 1}); }

private:
  ElfFile() = default;
  Status parse_headers(HeaderFaults faults);
  Status parse_program_headers(uint64_t phoff, uint16_t phentsize, uint16_t phnum);
  Status parse_section_headers(uint64_t shoff, uint16_t shentsize, uint16_t stride, uint64_t shnum,
                               uint32_t shstrndx);
  // Decompresses a section's `payload` (ELFCOMPRESS_ZLIB or _ZSTD) to `size` bytes, bounded by
  // the per-file limit, and keeps the result for the section.
  Result<std::span<const uint8_t>> inflate(const Section& s, uint32_t type, uint64_t size,
                                           std::span<const uint8_t> payload,
                                           uint64_t payload_offset) const;

  std::unique_ptr<MappedFile> mapping_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint16_t e_type_ = 0;
  uint64_t e_entry_ = 0;
  std::vector<Section> sections_;
  std::optional<Error> header_error_;
  std::vector<Segment> segments_;
  mutable std::deque<std::vector<uint8_t>> decompressed_;
  mutable std::vector<std::pair<uint32_t, size_t>> decompressed_index_; // section -> slot
  mutable uint64_t decompressed_bytes_ = 0; // bounded by a per-file limit (elf_file.cpp)
  mutable std::vector<std::pair<uint32_t, size_t>> relocated_index_; // section -> slot
  mutable std::vector<Symbol> symbols_;
  mutable bool symbols_loaded_ = false;
  mutable std::vector<Symbol> plt_symbols_; // by address; names in plt_names_
  mutable std::deque<std::string> plt_names_;
  mutable bool plt_loaded_ = false;
};

} // namespace ehelf
