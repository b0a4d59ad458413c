// A minimal ELF64 x86_64 image holding given sections (ET_DYN; one PT_LOAD covering the loaded
// ones at their addresses, PT_GNU_EH_FRAME when .eh_frame_hdr is among them; the others only in
// the file, as a separate debug file holds .debug_frame, its build-id note and its source's
// section headers): what `ehelf synth` writes and what tests hand back to the readers. It
// carries no code.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ehelf {

struct ImageSection {
  enum class Kind {
    Loaded,     // `bytes` at `addr`, inside the PT_LOAD (SHF_ALLOC)
    FileOnly,   // `bytes` in the file, in no segment (.debug_frame; a debug file's notes)
    Placeholder // SHT_NOBITS of `size` bytes at `addr`: a debug file's copy of its source's
                // section header (gdb places a debug file by matching section names)
  };
  std::string name; // ".eh_frame"
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;
  uint64_t align = 1;
  Kind kind = Kind::Loaded;
  uint32_t type = 1;  // SHT_PROGBITS; SHT_NOTE (7) for notes
  uint64_t flags = 2; // SHF_ALLOC; FileOnly and Placeholder sections say theirs
  uint64_t size = 0;  // Placeholder only
};

// Loaded sections must be sorted by address and not overlap; fewer than 0xff00 sections in all
// (SHN_LORESERVE).
std::vector<uint8_t> write_elf_image(std::span<const ImageSection> sections);

} // namespace ehelf
