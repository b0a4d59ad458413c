#include "dwarf/cfi_section.hpp"

#include "dwarf/augmentation.hpp"

#include <fmt/format.h>
#include <unordered_map>

#include "dwarf/constants.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf {
namespace {

class CfiParser {
public:
  CfiParser(CfiSection& out, const PointerBases& bases) : s_(out), bases_(bases) {}

  void run() {
    ByteCursor c(s_.data);
    while (!c.at_end() && !s_.error) {
      uint64_t start = c.offset();
      parse_entry(c, start, /*only_cie=*/false);
    }
  }

private:
  void fail(uint64_t offset, std::string msg) {
    if (!s_.error) s_.error = Error::at(s_.name, offset, std::move(msg));
  }

  bool is_cie_id(uint64_t id, bool dwarf64) const {
    if (s_.format == CfiFormat::EhFrame) return id == 0;
    return dwarf64 ? id == UINT64_MAX : id == UINT32_MAX;
  }

  // Parses the entry at c's position and advances c past it. With only_cie (a forward reference
  // from an FDE) the entry must be a CIE and is not recorded in `entries`.
  // Returns the CIE index for a CIE, or -1.
  int64_t parse_entry(ByteCursor& c, uint64_t start, bool only_cie) {
    uint64_t length = c.u32();
    if (!c.ok()) {
      fail(start, "truncated entry length");
      return -1;
    }
    bool dwarf64 = false;
    if (length == 0) {
      if (only_cie) {
        fail(start, "CIE pointer refers to a zero terminator");
        return -1;
      }
      s_.entries.push_back({CfiEntry::Kind::Terminator, 0, start});
      // Zero bytes that follow a terminator are padding (readelf skips them the same way).
      while (!c.at_end() && c.data()[c.pos()] == 0)
        c.skip(1);
      return -1;
    }
    if (length == 0xffffffff) {
      dwarf64 = true;
      length = c.u64();
      if (!c.ok()) {
        fail(start, "truncated 64-bit entry length");
        return -1;
      }
    } else if (length >= 0xfffffff0) {
      fail(start, fmt::format("reserved initial length value {:#x}", length));
      return -1;
    }
    if (length > c.remaining()) {
      fail(start, fmt::format("entry length {:#x} runs past the end of the section (only {:#x} "
                              "bytes left)",
                              length, c.remaining()));
      return -1;
    }
    uint64_t id_offset = c.offset();
    ByteCursor e = c.sub(length);
    uint64_t id = dwarf64 ? e.u64() : e.u32();
    if (!e.ok()) {
      fail(start, "entry too short for its CIE id / CIE pointer");
      return -1;
    }
    if (is_cie_id(id, dwarf64)) return parse_cie(e, start, length, dwarf64, only_cie);
    if (only_cie) {
      fail(start, "CIE pointer refers to an FDE, not a CIE");
      return -1;
    }
    parse_fde(e, start, length, dwarf64, id, id_offset);
    return -1;
  }

  int64_t parse_cie(ByteCursor& e, uint64_t start, uint64_t length, bool dwarf64, bool only_cie) {
    if (auto it = cie_at_.find(start); it != cie_at_.end()) {
      // Already parsed through a forward reference; now we reach it in order.
      if (!only_cie) s_.entries.push_back({CfiEntry::Kind::Cie, it->second, start});
      return it->second;
    }
    Cie cie;
    cie.offset = start;
    cie.length = length;
    cie.dwarf64 = dwarf64;
    const CieFault fault = read_cie_fields(e, s_.format, bases_, cie);
    using K = CieFault::Kind;
    switch (fault.kind) {
    case K::None:
      break;
    case K::Version:
      fail(start, fmt::format("unsupported CIE version {}", fault.value));
      return -1;
    case K::UnterminatedAugmentation:
      fail(start, "unterminated CIE augmentation string");
      return -1;
    case K::AddressSize:
      fail(start, fmt::format("unsupported CIE address size {}", fault.value));
      return -1;
    case K::SegmentSize:
      fail(start, fmt::format("unsupported CIE segment selector size {}", fault.value));
      return -1;
    case K::TruncatedHeader:
      fail(start, "truncated CIE header");
      return -1;
    case K::AugmentationDataPastEntry:
      fail(start,
           fmt::format("CIE augmentation data length {:#x} runs past the entry", fault.value));
      return -1;
    case K::BadPersonality:
      fail(fault.offset, fmt::format("bad personality pointer (encoding {:#x})", fault.value));
      return -1;
    case K::AugmentationTruncated:
      fail(start, "CIE augmentation data is shorter than its augmentation string needs");
      return -1;
    case K::FdeEncoding:
      fail(start, fmt::format("invalid FDE pointer encoding {:#x}", fault.value));
      return -1;
    case K::UnsupportedAugmentation:
      fail(start, fmt::format("unsupported CIE augmentation \"{}\"", cie.augmentation));
      return -1;
    }
    s_.cies.push_back(cie);
    auto index = static_cast<uint32_t>(s_.cies.size() - 1);
    cie_at_.emplace(start, index);
    if (!only_cie) s_.entries.push_back({CfiEntry::Kind::Cie, index, start});
    return index;
  }

  void parse_fde(ByteCursor& e, uint64_t start, uint64_t length, bool dwarf64, uint64_t id,
                 uint64_t id_offset) {
    Fde fde;
    fde.offset = start;
    fde.length = length;
    fde.dwarf64 = dwarf64;
    fde.cie_pointer = id;
    fde.end_offset = e.offset() + e.remaining();
    uint64_t cie_offset = s_.format == CfiFormat::EhFrame ? id_offset - id : id;
    if (s_.format == CfiFormat::EhFrame && id > id_offset) {
      fail(start, fmt::format("CIE pointer {:#x} points before the start of the section", id));
      return;
    }
    int64_t cie_index = -1;
    if (auto it = cie_at_.find(cie_offset); it != cie_at_.end()) {
      cie_index = it->second;
    } else {
      if (cie_offset >= s_.data.size() || ++forward_refs_ > 100000) {
        fail(start, fmt::format("CIE pointer {:#x} points outside the section", id));
        return;
      }
      ByteCursor c(s_.data);
      c.seek(cie_offset);
      cie_index = parse_entry(c, cie_offset, /*only_cie=*/true);
      if (s_.error) {
        s_.error->message = fmt::format("FDE at {:#x}: {}", start, s_.error->message);
        return;
      }
    }
    if (cie_index < 0) {
      fail(start, fmt::format("CIE pointer {:#x} does not point to a CIE", id));
      return;
    }
    fde.cie = static_cast<uint32_t>(cie_index);
    const Cie& cie = s_.cies[fde.cie];
    if (!read_encoded_pointer(e, cie.fde_encoding & 0x7f, bases_, fde.pc_begin)) {
      fail(start, "truncated or invalid FDE initial location");
      return;
    }
    // The range uses only the value format of the encoding, never a base.
    if (!read_encoded_pointer(e, cie.fde_encoding & 0x0f, PointerBases{}, fde.pc_range)) {
      fail(start, "truncated or invalid FDE address range");
      return;
    }
    if (cie.has_augmentation_data) {
      uint64_t aug_len = e.uleb();
      uint64_t aug_start = e.offset();
      fde.augmentation_data = e.bytes(aug_len);
      if (!e.ok()) {
        fail(start, fmt::format("FDE augmentation data length {:#x} runs past the entry", aug_len));
        return;
      }
      if (cie.lsda_encoding != dw::EH_PE_omit) {
        ByteCursor a(fde.augmentation_data, aug_start);
        uint64_t lsda = 0;
        if (read_encoded_pointer(a, cie.lsda_encoding & 0x7f, bases_, lsda)) {
          fde.lsda = lsda;
          fde.has_lsda = true;
        }
      }
    }
    fde.instructions_offset = e.offset();
    fde.instructions = e.bytes(e.remaining());
    s_.fdes.push_back(fde);
    s_.entries.push_back({CfiEntry::Kind::Fde, static_cast<uint32_t>(s_.fdes.size() - 1), start});
  }

  CfiSection& s_;
  const PointerBases& bases_;
  std::unordered_map<uint64_t, uint32_t> cie_at_;
  uint64_t forward_refs_ = 0;
};

} // namespace

CieFault read_cie_fields(ByteCursor& e, CfiFormat format, const PointerBases& bases, Cie& cie) {
  using K = CieFault::Kind;
  cie.end_offset = e.offset() + e.remaining();
  cie.version = e.u8();
  const bool eh = format == CfiFormat::EhFrame;
  if (!(cie.version == 1 || cie.version == 3 || (!eh && cie.version == 4)))
    return CieFault{K::Version, 0, cie.version};
  cie.augmentation = e.cstring();
  if (!e.ok()) return CieFault{K::UnterminatedAugmentation};
  if (cie.version >= 4) {
    cie.address_size = e.u8();
    cie.segment_size = e.u8();
    if (cie.address_size != 8 && cie.address_size != 4)
      return CieFault{K::AddressSize, 0, cie.address_size};
    if (cie.segment_size != 0) return CieFault{K::SegmentSize, 0, cie.segment_size};
  }
  if (cie.augmentation.starts_with("eh")) e.skip(cie.address_size); // GCC 2.x EH data pointer
  cie.code_align = e.uleb();
  cie.data_align = e.sleb();
  cie.ra_register = cie.version == 1 ? e.u8() : e.uleb();
  if (!e.ok()) return CieFault{K::TruncatedHeader};
  if (!eh) cie.fde_encoding = cie.address_size == 4 ? dw::EH_PE_udata4 : dw::EH_PE_absptr;

  std::string_view aug = cie.augmentation;
  if (aug.starts_with("eh")) aug.remove_prefix(2);
  if (!aug.empty() && aug[0] == 'z') {
    cie.has_augmentation_data = true;
    const uint64_t aug_len = e.uleb();
    const uint64_t aug_start = e.offset();
    cie.augmentation_data = e.bytes(aug_len);
    if (!e.ok()) return CieFault{K::AugmentationDataPastEntry, 0, aug_len};
    ByteCursor a(cie.augmentation_data, aug_start);
    Augmentation facts;
    facts.fde_encoding = cie.fde_encoding;
    switch (read_augmentation(aug.substr(1), a, bases, facts)) {
    case AugmentationStatus::Ok:
      break;
    case AugmentationStatus::BadPersonality:
      return CieFault{K::BadPersonality, a.offset(), facts.personality_encoding};
    case AugmentationStatus::Truncated:
      return CieFault{K::AugmentationTruncated};
    }
    cie.fde_encoding = facts.fde_encoding;
    cie.lsda_encoding = facts.lsda_encoding;
    cie.personality_encoding = facts.personality_encoding;
    cie.personality = facts.personality;
    cie.personality_slot = facts.personality_slot;
    cie.signal_frame = facts.signal_frame;
    cie.bkey = facts.bkey;
    cie.mte_tagged = facts.mte_tagged;
    if (encoded_pointer_size(cie.fde_encoding) == 0 &&
        (cie.fde_encoding & 0x0f) != dw::EH_PE_uleb128 &&
        (cie.fde_encoding & 0x0f) != dw::EH_PE_sleb128)
      return CieFault{K::FdeEncoding, 0, cie.fde_encoding};
  } else if (!aug.empty()) {
    return CieFault{K::UnsupportedAugmentation};
  }
  cie.instructions_offset = e.offset();
  cie.instructions = e.bytes(e.remaining());
  return CieFault{};
}

CfiSection parse_cfi_section(std::span<const uint8_t> data, CfiFormat format,
                             std::string section_name, const PointerBases& bases) {
  CfiSection s;
  s.format = format;
  s.name = std::move(section_name);
  s.address = bases.section_addr;
  s.data = data;
  CfiParser(s, bases).run();
  return s;
}

} // namespace ehelf
