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

// How wide the search table's entries may be.
enum class SearchTableWidth : uint8_t {
  Narrow,       // datarel|sdata4 only, as linkers write it (and libgcc's binary search reads)
  WideIfNeeded, // datarel|sdata8 when an address is more than 2 GiB from the header (frames
                // registered at run time: JIT code and its FDEs are anywhere)
};

// An .eh_frame_hdr at SVMA `hdr_addr` for .eh_frame at `frame_addr`, whose search table lists
// `entries` (sorted here), encoded as GNU ld writes it: eh_frame_ptr pcrel|sdata4, fde_count
// udata4, table datarel|sdata4 (or sdata8, see above). None when `frame_addr` or (narrow) an
// entry's address is more than 2 GiB from the header.
std::optional<std::vector<uint8_t>>
encode_eh_frame_hdr(std::vector<EhFrameHdr::Entry> entries, uint64_t frame_addr, uint64_t hdr_addr,
                    SearchTableWidth width = SearchTableWidth::Narrow);

// Problems found when checking the search table against .eh_frame (empty: consistent).
std::vector<std::string> verify_eh_frame_hdr(const EhFrameHdr& hdr, const CfiSection& eh_frame);

} // namespace ehelf
