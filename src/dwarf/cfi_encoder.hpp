// The DWARF CFI encoder: an UnwindTable (model rows) -> compact .eh_frame bytes (one CIE per kind
// of function, one FDE per contiguous run of a function's ranges, each row written as the
// difference from the previous one) and the .eh_frame_hdr binary-search table. The inverse of
// build_unwind_table for every rule the model holds.
#pragma once

#include <cstdint>
#include <vector>

#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"
#include "support/result.hpp"

namespace ehelf {

struct EncodedCfi {
  std::vector<uint8_t> eh_frame;
  std::vector<uint8_t> eh_frame_hdr;
  uint64_t fde_count = 0;
};

// Encodes `table` with .eh_frame at SVMA `eh_frame_addr` and .eh_frame_hdr at `hdr_addr`
// (pointers are pcrel|sdata4 in .eh_frame and datarel|sdata4 in the header, so both must lie
// within 2 GiB of the code). Fails, naming the address, for a row that DWARF cannot express
// with this CIE (a save offset that is not a multiple of 8, a CFA that becomes undefined again).
// Functions with a personality routine and an LSDA (FunctionInfo) get CIEs "zPLR" with them.
Result<EncodedCfi> encode_cfi(const UnwindTable& table, uint64_t eh_frame_addr, uint64_t hdr_addr);

// The size of the .eh_frame encode_cfi would produce (it does not depend on the addresses), so
// the caller can place .eh_frame_hdr after it.
Result<uint64_t> encoded_eh_frame_size(const UnwindTable& table);

} // namespace ehelf

namespace ehelf {

// encode_cfi placed after the table's last address (page-aligned, .eh_frame_hdr first, then
// .eh_frame) and wrapped in a minimal ELF image (elf/elf_writer.hpp) that readelf and
// load_module_cfi read.
Result<std::vector<uint8_t>> encode_cfi_elf(const UnwindTable& table);

// A runnable copy of `elf` whose unwind tables are `table`: .eh_frame_hdr and .eh_frame encoded
// in a new loaded segment with a PT_GNU_EH_FRAME (elf/elf_patch.hpp), so that the in-process
// unwinders (libgcc's for C++ exceptions, glibc's backtrace) find them.
Result<std::vector<uint8_t>> encode_cfi_patch(const ElfFile& elf, const UnwindTable& table);

} // namespace ehelf
