// LEB128 writers: the encodings DWARF uses for its variable-length integers, appended to a byte
// vector (the CFI encoder's instructions, the synthesizer's expressions). Readers: byte_cursor.
#pragma once

#include <cstdint>
#include <vector>

namespace ehelf {

inline void put_uleb128(std::vector<uint8_t>& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(v ? b | 0x80 : b);
  } while (v);
}

inline void put_sleb128(std::vector<uint8_t>& out, int64_t v) {
  for (;;) {
    uint8_t b = v & 0x7f;
    v >>= 7; // arithmetic shift
    if ((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40))) {
      out.push_back(b);
      return;
    }
    out.push_back(b | 0x80);
  }
}

} // namespace ehelf
