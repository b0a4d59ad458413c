// EhFrameHdr: the .eh_frame_hdr binary-search table (LSB "Exception Frames"), parsed and checked
// against the FDEs of .eh_frame.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dwarf/cfi_section.hpp"
#include "support/result.hpp"

namespace ehelf {

struct EhFrameHdr {
  uint8_t version = 0;
  uint8_t eh_frame_ptr_encoding = 0;
  uint8_t fde_count_encoding = 0;
  uint8_t table_encoding = 0;
  uint64_t eh_frame_ptr = 0; // SVMA of .eh_frame as the header records it
  uint64_t fde_count = 0;
  struct Entry {
    uint64_t initial_location = 0;
    uint64_t fde_address = 0;
  };
  std::vector<Entry> table; // empty if the header has no search table
};

// Parses the header at SVMA `address`.
Result<EhFrameHdr> parse_eh_frame_hdr(std::span<const uint8_t> data, uint64_t address);

// Problems found when checking the search table against .eh_frame (empty: consistent).
std::vector<std::string> verify_eh_frame_hdr(const EhFrameHdr& hdr, const CfiSection& eh_frame);

} // namespace ehelf
