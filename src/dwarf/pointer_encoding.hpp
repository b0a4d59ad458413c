// Reading DW_EH_PE-encoded pointers (LSB "Exception Frames" spec) from a ByteCursor.
#pragma once

#include <cstdint>
#include <functional>

#include "support/byte_cursor.hpp"

namespace ehelf {

// The bases that relative encodings add. `section_addr` is the SVMA of the cursor's section start
// (the cursor's base offset is the byte offset within that section).
struct PointerBases {
  uint64_t section_addr = 0;
  uint64_t text_base = 0; // DW_EH_PE_textrel
  uint64_t data_base = 0; // DW_EH_PE_datarel (.got for .eh_frame, the hdr for .eh_frame_hdr)
  uint64_t func_base = 0; // DW_EH_PE_funcrel
  // DW_EH_PE_indirect: reads the pointer stored at an address; absent => left undereferenced.
  std::function<bool(uint64_t addr, uint64_t& out)> read_indirect;
};

// Reads one pointer with `encoding`. Returns false (cursor failed or encoding invalid) on error.
// Sets `*indirect_unresolved` when an indirect pointer could not be dereferenced.
bool read_encoded_pointer(ByteCursor& c, uint8_t encoding, const PointerBases& bases,
                          uint64_t& out, bool* indirect_unresolved = nullptr);

// Size in bytes of a fixed-size encoding (0 for LEB128 or invalid ones).
unsigned encoded_pointer_size(uint8_t encoding);

} // namespace ehelf
