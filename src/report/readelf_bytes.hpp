// Reads as readelf's dwarf.c makes them, for the renderers that must print what readelf prints
// from any bytes: fixed-size reads clipped at a limit (SAFE_BYTE_GET), LEB128 read up to it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace ehelf {

// Positions are offsets into the data; every read is clipped at its limit and at the data's end,
// so nothing is ever read outside the data.
class ReadelfBytes {
public:
  explicit ReadelfBytes(std::span<const uint8_t> data) : data_(data) {}
  uint64_t size() const { return data_.size(); }
  uint8_t at(uint64_t pos) const { return pos < data_.size() ? data_[pos] : 0; }
  std::span<const uint8_t> span(uint64_t pos, uint64_t n) const {
    pos = std::min<uint64_t>(pos, data_.size());
    return data_.subspan(pos, std::min<uint64_t>(n, data_.size() - pos));
  }

  // SAFE_BYTE_GET_AND_INC: `n` (at most 8) bytes little-endian, of which only those before
  // `limit` are read (the rest count as zero); the position moves past the bytes read only.
  uint64_t get(uint64_t& pos, unsigned n, uint64_t limit) const {
    unsigned got = 0;
    uint64_t v = read(pos, n, limit, got);
    pos += got;
    return v;
  }
  // SAFE_SIGNED_BYTE_GET_AND_INC: the same, sign-extended from the bytes actually read when
  // there are 1 to 4 of them (readelf's byte_get_signed leaves 5 to 7 bytes as they are).
  int64_t get_signed(uint64_t& pos, unsigned n, uint64_t limit) const {
    unsigned got = 0;
    uint64_t v = read(pos, n, limit, got);
    pos += got;
    if (got >= 1 && got <= 4 && (v >> (8 * got - 1))) v |= ~uint64_t{0} << (8 * got);
    return static_cast<int64_t>(v);
  }

  // read_leb128: as many bytes as it takes, up to `limit`. Bits past 64 are lost. `status` gets
  // readelf's flags: 1 the data ended first, 2 the value did not fit.
  uint64_t leb(uint64_t& pos, uint64_t limit, bool sign, int& status) const {
    limit = std::min<uint64_t>(limit, data_.size());
    uint64_t result = 0;
    unsigned shift = 0;
    status = 1;
    while (pos < limit) {
      uint8_t byte = data_[pos++];
      uint8_t lost = byte, mask = 0x7f;
      if (shift < 64) {
        result |= uint64_t{byte & 0x7fu} << shift;
        lost = static_cast<uint8_t>(byte ^ (result >> shift));
        mask = static_cast<uint8_t>(0x7f ^ (uint64_t{0x7f} << shift >> shift));
        shift += 7;
      }
      if ((lost & mask) != (sign && static_cast<int64_t>(result) < 0 ? mask : 0)) status |= 2;
      if (!(byte & 0x80)) {
        status &= ~1;
        if (sign && shift < 64 && (byte & 0x40)) result |= ~uint64_t{0} << shift;
        break;
      }
    }
    return result;
  }
  uint64_t uleb(uint64_t& pos, uint64_t limit) const {
    int status = 0;
    return leb(pos, limit, false, status);
  }
  int64_t sleb(uint64_t& pos, uint64_t limit) const {
    int status = 0;
    return static_cast<int64_t>(leb(pos, limit, true, status));
  }

private:
  uint64_t read(uint64_t pos, unsigned n, uint64_t limit, unsigned& got) const {
    limit = std::min<uint64_t>(limit, data_.size());
    got = pos < limit ? static_cast<unsigned>(std::min<uint64_t>(n, limit - pos)) : 0;
    uint64_t v = 0;
    for (unsigned i = 0; i < got; ++i)
      v |= uint64_t{data_[pos + i]} << (8 * i);
    return v;
  }

  std::span<const uint8_t> data_;
};

} // namespace ehelf
