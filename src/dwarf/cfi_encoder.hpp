// The DWARF CFI encoder: an UnwindTable (model rows) -> compact .eh_frame or .debug_frame bytes
// (one CIE per kind of function, one FDE per contiguous run of a function's ranges, each row
// written as the difference from the previous one) and .eh_frame's .eh_frame_hdr binary-search
// table. The inverse of build_unwind_table for every rule the model holds.
#pragma once

#include <cstdint>
#include <vector>

#include "dwarf/cfi_section.hpp"
#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"
#include "support/result.hpp"

namespace ehelf {

struct EncodedCfi {
  std::vector<uint8_t> frame;        // .eh_frame or .debug_frame
  std::vector<uint8_t> eh_frame_hdr; // .eh_frame only
  uint64_t fde_count = 0;
};

// Encodes `table` in `format`.
// .eh_frame at SVMA `frame_addr` with its .eh_frame_hdr at `hdr_addr` (pointers are
// pcrel|sdata4 in .eh_frame and datarel|sdata4 in the header, so both must lie within 2 GiB of
// the code); functions with a personality routine and an LSDA (FunctionInfo) get CIEs "zPLR".
// .debug_frame as gcc and gas write it for x86_64 (CIE id 0xffffffff, version 1, CIE pointers as
// section offsets, 8-byte absolute addresses; no exception-handling data): the addresses are
// not used. Either way the rows are the same and the FDEs cover the same ranges.
// Fails, naming the address, for a row that DWARF cannot express with this CIE (a save offset
// that is not a multiple of 8, a CFA that becomes undefined again); with `left_out`, the FDE
// holding such a row is left out instead and listed there, and the rest is encoded.
struct LeftOutFde {
  uint32_t function = 0; // the table's
  uint64_t begin = 0;    // the FDE's first address
  Error why;             // names the row's address
};
Result<EncodedCfi> encode_cfi(const UnwindTable& table, CfiFormat format, uint64_t frame_addr = 0,
                              uint64_t hdr_addr = 0, std::vector<LeftOutFde>* left_out = nullptr);

} // namespace ehelf

namespace ehelf {

struct CfiElfOptions {
  // .eh_frame and .eh_frame_hdr in a PT_LOAD above the table's last address (and the source's
  // sections), .eh_frame_hdr first; or .debug_frame, in no segment.
  CfiFormat format = CfiFormat::EhFrame;
  // The file the table was synthesized from (null: none). Its notes (the NT_GNU_BUILD_ID among
  // them) and its allocated sections' headers (SHT_NOBITS, as objcopy --only-keep-debug writes
  // them) make the image its separate debug file, found where debug files are looked up
  // (DEBUGDIR/.build-id/xx/yyyy.debug) by ehelf, gdb and readelf.
  const ElfFile* source = nullptr;
  // Where to list the FDEs left out because a row cannot be encoded (null: fail instead).
  std::vector<LeftOutFde>* left_out = nullptr;
};

// encode_cfi wrapped in a minimal ELF image (elf/elf_writer.hpp) that readelf, gdb and
// load_module_cfi read.
Result<std::vector<uint8_t>> encode_cfi_elf(const UnwindTable& table,
                                            const CfiElfOptions& options = {});

// A runnable copy of `elf` whose unwind tables are `table`: .eh_frame_hdr and .eh_frame encoded
// in a new loaded segment with a PT_GNU_EH_FRAME (elf/elf_patch.hpp), so that the in-process
// unwinders (libgcc's for C++ exceptions, glibc's backtrace) find them. `left_out` as for
// encode_cfi.
Result<std::vector<uint8_t>> encode_cfi_patch(const ElfFile& elf, const UnwindTable& table,
                                              std::vector<LeftOutFde>* left_out = nullptr);

} // namespace ehelf
