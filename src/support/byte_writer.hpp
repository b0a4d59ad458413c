// LEB128 and little-endian integers appended to a byte vector: the writing side of ByteCursor,
// for the encoders (the CFI encoder, the check's trace).
#pragma once

#include <cstdint>
#include <vector>

namespace ehelf {

inline void put_uleb(std::vector<uint8_t>& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(v ? b | 0x80 : b);
  } while (v);
}

inline void put_sleb(std::vector<uint8_t>& out, int64_t v) {
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

inline void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

inline void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

} // namespace ehelf
