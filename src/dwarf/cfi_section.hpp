// CfiSection: the CIEs and FDEs of one .eh_frame or .debug_frame section, parsed but not yet
// interpreted (instructions stay as bytes; see cfa_instruction.hpp to decode them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dwarf/pointer_encoding.hpp"
#include "support/byte_cursor.hpp"
#include "support/error.hpp"

namespace ehelf {

enum class CfiFormat { EhFrame, DebugFrame };

struct Cie {
  uint64_t offset = 0; // of the length field, within the section
  uint64_t length = 0; // the length field's value (excluding the length field itself)
  bool dwarf64 = false;
  uint8_t version = 0;
  std::string_view augmentation;
  uint8_t address_size = 8;
  uint8_t segment_size = 0;
  uint64_t code_align = 0;
  int64_t data_align = 0;
  uint64_t ra_register = 0;
  // From the augmentation string:
  bool has_augmentation_data = false; // 'z'
  std::span<const uint8_t> augmentation_data;
  uint8_t fde_encoding = 0;     // 'R' (DW_EH_PE_absptr if absent)
  uint8_t lsda_encoding = 0xff; // 'L' (DW_EH_PE_omit if absent)
  uint8_t personality_encoding = 0xff;
  uint64_t personality = 0;      // 'P'
  uint64_t personality_slot = 0; // where an indirect personality pointer is (0: direct)
  bool signal_frame = false;     // 'S'
  bool mte_tagged = false;       // 'G' (AArch64 MTE; recognised, no effect)
  bool bkey = false;             // 'B' (AArch64 pointer auth; recognised, no effect)
  std::span<const uint8_t> instructions;
  uint64_t instructions_offset = 0;
  uint64_t end_offset = 0; // one past the entry
};

struct Fde {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool dwarf64 = false;
  uint64_t cie_pointer = 0; // the raw CIE_pointer field
  uint32_t cie = 0;         // index into CfiSection::cies
  uint64_t pc_begin = 0;    // SVMA
  uint64_t pc_range = 0;
  uint64_t lsda = 0;
  bool has_lsda = false;
  std::span<const uint8_t> augmentation_data;
  std::span<const uint8_t> instructions;
  uint64_t instructions_offset = 0;
  uint64_t end_offset = 0;
  uint64_t pc_end() const { return pc_begin + pc_range; }
};

// Entries in section order, as readelf walks them.
struct CfiEntry {
  enum class Kind : uint8_t { Cie, Fde, Terminator } kind;
  uint32_t index = 0;  // into cies or fdes
  uint64_t offset = 0; // section offset
};

struct CfiSection {
  CfiFormat format = CfiFormat::EhFrame;
  std::string name; // ".eh_frame", ".debug_frame"
  uint64_t address = 0;
  std::span<const uint8_t> data;
  std::vector<Cie> cies;
  std::vector<Fde> fdes;
  std::vector<CfiEntry> entries;
  // Parsing stops at the first malformed entry; what came before stays usable.
  std::optional<Error> error;
};

// What is wrong with a CIE's fields (read_cie_fields), and where: the section parser words it,
// a row lookup only refuses the entry.
struct CieFault {
  enum class Kind : uint8_t {
    None,
    Version,                   // value: the version
    UnterminatedAugmentation,  //
    AddressSize,               // value: the size
    SegmentSize,               // value: the size
    TruncatedHeader,           //
    AugmentationDataPastEntry, // value: the augmentation data's length
    BadPersonality,            // offset: where in the augmentation data; value: its encoding
    AugmentationTruncated,     //
    FdeEncoding,               // value: the encoding
    UnsupportedAugmentation,   //
  };
  Kind kind = Kind::None;
  uint64_t offset = 0; // where the problem is, when not at the entry's start
  uint64_t value = 0;
};

// The one CIE parser: reads the fields of the CIE whose body (after its CIE id) is at `body`'s
// position into `cie` (offset, length and dwarf64 are the caller's), for both formats: versions
// 1 and 3 (and 4 in .debug_frame), the augmentations 'z', 'R', 'L', 'P', 'S', 'B', 'G' and GCC
// 2's "eh". Allocates nothing (a signal handler's row lookup uses it).
CieFault read_cie_fields(ByteCursor& body, CfiFormat format, const PointerBases& bases, Cie& cie);

// Parses every entry. `bases.section_addr` should equal the section's address.
CfiSection parse_cfi_section(std::span<const uint8_t> data, CfiFormat format,
                             std::string section_name, const PointerBases& bases);

} // namespace ehelf
