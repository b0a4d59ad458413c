#include "dwarf/eh_frame_hdr.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <unordered_map>

#include "dwarf/constants.hpp"
#include "support/byte_writer.hpp"

namespace ehelf {

Result<EhFrameHdr> parse_eh_frame_hdr(std::span<const uint8_t> data, uint64_t address) {
  const std::string name = ".eh_frame_hdr";
  ByteCursor c(data);
  EhFrameHdr h;
  h.version = c.u8();
  h.eh_frame_ptr_encoding = c.u8();
  h.fde_count_encoding = c.u8();
  h.table_encoding = c.u8();
  if (!c.ok()) return Error::at(name, 0, "truncated header");
  if (h.version != 1) return Error::at(name, 0, fmt::format("unsupported version {}", h.version));
  PointerBases bases;
  bases.section_addr = address;
  bases.data_base = address; // datarel in the header is relative to the header's start
  uint64_t at = c.offset();
  if (!read_encoded_pointer(c, h.eh_frame_ptr_encoding, bases, h.eh_frame_ptr))
    return Error::at(name, at, "bad eh_frame_ptr");
  if (h.fde_count_encoding == dw::EH_PE_omit || h.table_encoding == dw::EH_PE_omit) return h;
  at = c.offset();
  if (!read_encoded_pointer(c, h.fde_count_encoding, bases, h.fde_count))
    return Error::at(name, at, "bad fde_count");
  unsigned entry_size = 2 * encoded_pointer_size(h.table_encoding);
  if (entry_size == 0)
    return Error::at(name, 3,
                     fmt::format("table encoding {:#x} is not fixed-size", h.table_encoding));
  if (h.fde_count > c.remaining() / entry_size)
    return Error::at(
        name, at, fmt::format("fde_count {} needs more bytes than the section has", h.fde_count));
  h.table.reserve(h.fde_count);
  for (uint64_t i = 0; i < h.fde_count; ++i) {
    EhFrameHdr::Entry e;
    at = c.offset();
    if (!read_encoded_pointer(c, h.table_encoding, bases, e.initial_location) ||
        !read_encoded_pointer(c, h.table_encoding, bases, e.fde_address))
      return Error::at(name, at, "bad search table entry");
    h.table.push_back(e);
  }
  return h;
}

std::optional<std::vector<uint8_t>> encode_eh_frame_hdr(std::vector<EhFrameHdr::Entry> entries,
                                                        uint64_t frame_addr, uint64_t hdr_addr,
                                                        SearchTableWidth width) {
  // Each field is the difference from the header (its eh_frame_ptr field for pcrel).
  const auto fits = [hdr_addr](uint64_t addr) {
    const auto d = static_cast<int64_t>(addr - hdr_addr);
    return d >= INT32_MIN && d <= INT32_MAX;
  };
  if (!fits(frame_addr - 4) || entries.size() > UINT32_MAX) return std::nullopt;
  bool narrow = true;
  for (const EhFrameHdr::Entry& e : entries)
    narrow = narrow && fits(e.initial_location) && fits(e.fde_address);
  if (!narrow && width == SearchTableWidth::Narrow) return std::nullopt;
  const uint8_t entry_encoding = narrow ? dw::EH_PE_sdata4 : dw::EH_PE_sdata8;
  std::vector<uint8_t> hdr = {1, dw::EH_PE_pcrel | dw::EH_PE_sdata4, dw::EH_PE_udata4,
                              static_cast<uint8_t>(dw::EH_PE_datarel | entry_encoding)};
  put_u32(hdr, static_cast<uint32_t>(frame_addr - (hdr_addr + 4)));
  put_u32(hdr, static_cast<uint32_t>(entries.size()));
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.initial_location < b.initial_location; });
  hdr.reserve(hdr.size() + (narrow ? 8 : 16) * entries.size());
  for (const EhFrameHdr::Entry& e : entries)
    for (const uint64_t addr : {e.initial_location, e.fde_address}) {
      const uint64_t d = addr - hdr_addr;
      put_u32(hdr, static_cast<uint32_t>(d));
      if (!narrow) put_u32(hdr, static_cast<uint32_t>(d >> 32));
    }
  return hdr;
}

std::vector<std::string> verify_eh_frame_hdr(const EhFrameHdr& hdr, const CfiSection& eh_frame) {
  std::vector<std::string> problems;
  if (hdr.eh_frame_ptr != eh_frame.address)
    problems.push_back(fmt::format("eh_frame_ptr {:#x} is not the .eh_frame address {:#x}",
                                   hdr.eh_frame_ptr, eh_frame.address));
  std::unordered_map<uint64_t, const Fde*> fde_at; // by SVMA
  for (const Fde& f : eh_frame.fdes)
    fde_at.emplace(eh_frame.address + f.offset, &f);
  for (size_t i = 0; i < hdr.table.size(); ++i) {
    const auto& e = hdr.table[i];
    if (i > 0 && e.initial_location < hdr.table[i - 1].initial_location)
      problems.push_back(fmt::format("search table not sorted at entry {}", i));
    auto it = fde_at.find(e.fde_address);
    if (it == fde_at.end())
      problems.push_back(
          fmt::format("entry {} points to {:#x}, which is not an FDE", i, e.fde_address));
    else if (it->second->pc_begin != e.initial_location)
      problems.push_back(fmt::format("entry {} says {:#x} but its FDE starts at {:#x}", i,
                                     e.initial_location, it->second->pc_begin));
    if (problems.size() > 20) break;
  }
  if (problems.empty() && !hdr.table.empty() && hdr.table.size() != eh_frame.fdes.size()) {
    // Linkers omit FDEs for discarded code; every FDE that covers code should be listed.
    size_t nonempty = 0;
    for (const Fde& f : eh_frame.fdes)
      nonempty += f.pc_range != 0 && f.pc_begin != 0;
    if (hdr.table.size() < nonempty)
      problems.push_back(fmt::format("search table lists {} FDEs but .eh_frame has {}",
                                     hdr.table.size(), nonempty));
  }
  return problems;
}

} // namespace ehelf
