// A minimal ELF64 x86_64 image holding given sections at given addresses (ET_DYN, one PT_LOAD
// covering them, PT_GNU_EH_FRAME when .eh_frame_hdr is among them): what `ehelf synth` writes
// and what tests hand back to the readers. It carries no code.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ehelf {

struct ImageSection {
  std::string name; // ".eh_frame"
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;
  uint64_t align = 1;
};

// Sections must be sorted by address and not overlap.
std::vector<uint8_t> write_elf_image(std::span<const ImageSection> sections);

} // namespace ehelf
