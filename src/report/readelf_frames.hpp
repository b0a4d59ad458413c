// The interpreted call-frame tables printed exactly as `readelf -wF` (GNU binutils 2.40) prints
// them, so readelf can serve as an oracle for our CFI reader.
//
// This re-enacts readelf's display_debug_frames over the sections' raw bytes, quirks and
// leniency included (clipped reads, registers truncated to 32 bits, columns first referenced
// later printed as "u", def_cfa_offset after an expression keeping "exp", state remembered
// across FDEs), so that hostile files print what readelf prints too. It shares no parsing with
// dwarf/cfi_section, which follows DWARF and refuses what readelf reads anyway.
// docs/readelf-wF-format.md has every rule, and the few places where ehelf stays safe instead.
// readelf_frames.cpp is one file of ~900 lines on purpose: its walker follows binutils' dwarf.c
// (display_debug_frames, its Frame_Chunk, its two passes) in that code's order, so that the two
// are read side by side when readelf's output changes.
#pragma once

#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elf/elf_file.hpp"
#include "support/error.hpp"

namespace ehelf {

// Complaints, readelf's on stderr (clipped reads, bad lengths, unknown opcodes...), each naming
// the section and offset; they never change what is printed. Only the first few are kept (a
// hostile section can make millions), all are counted.
struct ReadelfWarnings {
  static constexpr size_t kKept = 16;
  std::vector<Error> kept;
  uint64_t count = 0;
  void add(Error e) {
    if (kept.size() < kKept) kept.push_back(std::move(e));
    ++count;
  }
};

// What readelf would report besides its standard output.
struct ReadelfDumpOutcome {
  ReadelfWarnings warnings;
  // readelf would exit with status 1 (a NOBITS frame section, an unrecognized one).
  bool failed = false;
  // Sections readelf takes for frame sections by their names (printed or not).
  unsigned frame_sections = 0;
};

// Appends the text for every frame section of `file` (in section-header order) to `out`, then
// those of `separate`, the file's separate debug file if one was found (readelf follows
// build-ids and .gnu_debuglink). `display_name` is the file name as readelf would print it.
// With a `sink`, text is written there as it accumulates (and `out` keeps only the unwritten
// rest), so large files need no large buffer.
ReadelfDumpOutcome render_readelf_frames(const ElfFile& file, const ElfFile* separate,
                                         const std::string& display_name, std::string& out,
                                         std::FILE* sink = nullptr);

// One frame section's bytes at `address`, as readelf prints it (header included); `name` decides
// the format (exactly ".eh_frame", else .debug_frame's). Returns readelf's warnings. For tests
// and fuzzing.
ReadelfWarnings render_readelf_frame_section(std::span<const uint8_t> data, uint64_t address,
                                             std::string_view name, std::string& out);

} // namespace ehelf
