#include "dwarf/pointer_encoding.hpp"

#include "dwarf/constants.hpp"

namespace ehelf {

unsigned encoded_pointer_size(uint8_t encoding) {
  switch (encoding & 0x0f) {
  case dw::EH_PE_absptr: return 8;
  case dw::EH_PE_udata2:
  case dw::EH_PE_sdata2: return 2;
  case dw::EH_PE_udata4:
  case dw::EH_PE_sdata4: return 4;
  case dw::EH_PE_udata8:
  case dw::EH_PE_sdata8: return 8;
  default: return 0;
  }
}

bool read_encoded_pointer(ByteCursor& c, uint8_t encoding, const PointerBases& bases,
                          uint64_t& out, bool* indirect_unresolved) {
  if (encoding == dw::EH_PE_omit) return false;
  uint64_t field_addr = bases.section_addr + c.offset(); // for pcrel
  if ((encoding & 0x70) == dw::EH_PE_aligned) {
    // Aligned: the value is an absolute pointer at the next 8-byte boundary of the address.
    uint64_t aligned = (field_addr + 7) & ~uint64_t(7);
    c.skip(aligned - field_addr);
    out = c.u64();
    return c.ok();
  }
  uint64_t v = 0;
  switch (encoding & 0x0f) {
  case dw::EH_PE_absptr: v = c.u64(); break;
  case dw::EH_PE_uleb128: v = c.uleb(); break;
  case dw::EH_PE_udata2: v = c.u16(); break;
  case dw::EH_PE_udata4: v = c.u32(); break;
  case dw::EH_PE_udata8: v = c.u64(); break;
  case dw::EH_PE_sleb128: v = static_cast<uint64_t>(c.sleb()); break;
  case dw::EH_PE_sdata2: v = static_cast<uint64_t>(int64_t(c.s16())); break;
  case dw::EH_PE_sdata4: v = static_cast<uint64_t>(int64_t(c.s32())); break;
  case dw::EH_PE_sdata8: v = c.u64(); break;
  default: return false; // invalid format nibble
  }
  if (!c.ok()) return false;
  switch (encoding & 0x70) {
  case 0: break;
  case dw::EH_PE_pcrel: v += field_addr; break;
  case dw::EH_PE_textrel: v += bases.text_base; break;
  case dw::EH_PE_datarel: v += bases.data_base; break;
  case dw::EH_PE_funcrel: v += bases.func_base; break;
  default: return false;
  }
  if (encoding & dw::EH_PE_indirect) {
    uint64_t target = 0;
    if (bases.read_indirect && bases.read_indirect(v, target)) v = target;
    else if (indirect_unresolved) *indirect_unresolved = true;
  }
  out = v;
  return true;
}

} // namespace ehelf
