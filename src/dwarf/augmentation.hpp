// The letters of a CIE's 'z' augmentation string and the data they read ("zPLR": personality,
// LSDA encoding, FDE encoding; "S": signal frame): one reading for the whole-section parser
// (CfiSection) and the on-demand row lookup (RowLookup), which must agree.
#pragma once

#include <cstdint>
#include <string_view>

#include "dwarf/constants.hpp"
#include "dwarf/pointer_encoding.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf {

struct Augmentation {
  uint8_t fde_encoding = dw::EH_PE_absptr; // 'R'
  uint8_t lsda_encoding = dw::EH_PE_omit;  // 'L'
  uint8_t personality_encoding = 0xff;     // 'P'
  // The personality routine's address: the pointer itself, or for an indirect one the value
  // `bases.read_indirect` read at its slot (the slot's address when nothing could be read, as
  // the file's own decoding always gave it).
  uint64_t personality = 0;
  uint64_t personality_slot = 0; // where an indirect personality pointer is (0: direct)
  bool signal_frame = false;     // 'S'
  bool bkey = false;             // 'B' (AArch64 pointer auth; recognised, no effect)
  bool mte_tagged = false;       // 'G' (AArch64 MTE; recognised, no effect)
};

enum class AugmentationStatus {
  Ok,             // every letter read, or reading stopped at an unknown one ('z' gave the
                  // data's length, so the instructions are still found)
  Truncated,      // the data is shorter than the letters need
  BadPersonality, // the personality pointer cannot be read (invalid encoding, or cut short)
};

// Reads the data of `letters` (the string after 'z') from `data`, into `out`. Allocates nothing
// unless `bases.read_indirect` does.
AugmentationStatus read_augmentation(std::string_view letters, ByteCursor& data,
                                     const PointerBases& bases, Augmentation& out);

} // namespace ehelf
