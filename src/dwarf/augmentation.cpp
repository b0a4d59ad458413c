#include "dwarf/augmentation.hpp"

namespace ehelf {

AugmentationStatus read_augmentation(std::string_view letters, ByteCursor& a,
                                     const PointerBases& bases, Augmentation& out) {
  for (char ch : letters) {
    switch (ch) {
    case 'L':
      out.lsda_encoding = a.u8();
      break;
    case 'R':
      out.fde_encoding = a.u8();
      break;
    case 'S':
      out.signal_frame = true;
      break;
    case 'B':
      out.bkey = true;
      break;
    case 'G':
      out.mte_tagged = true;
      break;
    case 'P': {
      out.personality_encoding = a.u8();
      // An indirect pointer (C++: DW.ref.__gxx_personality_v0) is kept as its slot, which a
      // process reads once the loader has relocated it; the file's value there may be 0.
      const bool indirect = out.personality_encoding & dw::EH_PE_indirect;
      uint64_t value = 0;
      if (!read_encoded_pointer(a, out.personality_encoding & ~dw::EH_PE_indirect, bases, value))
        return AugmentationStatus::BadPersonality;
      if (!indirect) {
        out.personality = value;
      } else {
        out.personality_slot = value;
        uint64_t routine = 0;
        out.personality =
            bases.read_indirect && bases.read_indirect(value, routine) ? routine : value;
      }
      break;
    }
    default:
      return AugmentationStatus::Ok;
    }
    if (!a.ok()) return AugmentationStatus::Truncated;
  }
  return AugmentationStatus::Ok;
}

} // namespace ehelf
