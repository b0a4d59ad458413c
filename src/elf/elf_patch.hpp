// A runnable copy of an ELF file with new sections in a new loaded segment: the program header
// table is rewritten at the end of the file (inside the new PT_LOAD, so the kernel's AT_PHDR and
// PT_PHDR stay true), followed by the sections; the new PT_LOAD comes after the last one (address
// order kept), PT_GNU_EH_FRAME points at a new .eh_frame_hdr, and the section headers gain the
// new sections. The original bytes stay where they were: code and data do not move.
//
// The segment's address keeps the first PT_LOAD's address-minus-offset difference (older kernels
// compute AT_PHDR from it) and lies above every existing segment's memory (.bss included), so the
// file is zero-padded up to there.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "elf/elf_file.hpp"
#include "elf/elf_writer.hpp"
#include "support/result.hpp"

namespace ehelf {

struct AppendPlan {
  uint64_t file_offset = 0;  // where the new segment starts in the file (page-aligned)
  uint64_t vaddr = 0;        // and in memory
  uint64_t content_addr = 0; // the first address free for sections (after the new phdrs)
  uint16_t phnum = 0;        // program headers in the rewritten table
};

// Where `elf`'s new segment would go. Fails for a file without PT_LOAD or program headers.
Result<AppendPlan> plan_append(const ElfFile& elf);

// The patched file: `sections` (sorted, at addresses from plan.content_addr on) appended in the
// new segment. Fails if a section lies outside the plan.
Result<std::vector<uint8_t>> append_loaded_sections(const ElfFile& elf, const AppendPlan& plan,
                                                    std::span<const ImageSection> sections);

} // namespace ehelf
