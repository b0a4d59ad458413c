// ByteCursor: bounds-checked little-endian reads over a byte span, with a sticky failure flag.
//
// Every read past the end sets the failure flag, records the offset and returns 0, so parsing
// code reads straight-line and checks ok() at the points where it matters. Nothing here can read
// outside [begin, end).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace ehelf {

class ByteCursor {
public:
  ByteCursor() = default;
  // `base_offset` is the offset of data[0] within its section, used only for reporting.
  explicit ByteCursor(std::span<const uint8_t> data, uint64_t base_offset = 0)
      : data_(data), base_(base_offset) {}

  bool ok() const { return !failed_; }
  bool at_end() const { return pos_ >= data_.size(); }
  size_t pos() const { return pos_; }
  size_t size() const { return data_.size(); }
  size_t remaining() const { return failed_ ? 0 : data_.size() - pos_; }
  uint64_t offset() const { return base_ + pos_; }              // offset of the next byte
  uint64_t failure_offset() const { return base_ + fail_pos_; } // where a read first failed
  std::span<const uint8_t> data() const { return data_; }

  void seek(size_t pos) {
    if (pos > data_.size())
      fail();
    else
      pos_ = pos;
  }
  void skip(uint64_t n) {
    if (n > remaining())
      fail();
    else
      pos_ += n;
  }
  void fail() {
    if (!failed_) fail_pos_ = pos_;
    failed_ = true;
    pos_ = data_.size();
  }

  uint8_t u8() { return read_le<uint8_t>(); }
  uint16_t u16() { return read_le<uint16_t>(); }
  uint32_t u32() { return read_le<uint32_t>(); }
  uint64_t u64() { return read_le<uint64_t>(); }
  int8_t s8() { return static_cast<int8_t>(u8()); }
  int16_t s16() { return static_cast<int16_t>(u16()); }
  int32_t s32() { return static_cast<int32_t>(u32()); }
  int64_t s64() { return static_cast<int64_t>(u64()); }

  // Unsigned LEB128. Bits beyond 64 are dropped; more than 10 bytes of continuation is refused
  // (an "absurd" LEB128 cannot make us loop over the whole section).
  uint64_t uleb() {
    uint64_t result = 0;
    unsigned shift = 0;
    for (int i = 0; i < 16; ++i) {
      uint8_t b = u8();
      if (failed_) return 0;
      if (shift < 64) result |= uint64_t(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) return result;
    }
    fail();
    return 0;
  }
  int64_t sleb() {
    uint64_t result = 0;
    unsigned shift = 0;
    for (int i = 0; i < 16; ++i) {
      uint8_t b = u8();
      if (failed_) return 0;
      if (shift < 64) result |= uint64_t(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) {
        if (shift < 64 && (b & 0x40)) result |= ~uint64_t(0) << shift;
        return static_cast<int64_t>(result);
      }
    }
    fail();
    return 0;
  }

  // A NUL-terminated string; fails if no NUL before the end.
  std::string_view cstring() {
    if (failed_) return {};
    if (pos_ >= data_.size()) { // not even the NUL (and no memchr over no bytes: data may be null)
      fail();
      return {};
    }
    const void* nul = std::memchr(data_.data() + pos_, 0, data_.size() - pos_);
    if (!nul) {
      fail();
      return {};
    }
    size_t len = static_cast<const uint8_t*>(nul) - (data_.data() + pos_);
    std::string_view s(reinterpret_cast<const char*>(data_.data() + pos_), len);
    pos_ += len + 1;
    return s;
  }

  // The next n bytes as a sub-span (empty and failed if fewer remain).
  std::span<const uint8_t> bytes(uint64_t n) {
    if (n > remaining()) {
      fail();
      return {};
    }
    auto s = data_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  // A cursor over the next n bytes, advancing this one past them.
  ByteCursor sub(uint64_t n) {
    uint64_t start = offset();
    auto s = bytes(n);
    ByteCursor c(s, start);
    if (failed_) c.fail();
    return c;
  }

private:
  template <class T> T read_le() {
    if (failed_ || data_.size() - pos_ < sizeof(T)) {
      fail();
      return 0;
    }
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T)); // x86_64 hosts only: little-endian
    pos_ += sizeof(T);
    return v;
  }

  std::span<const uint8_t> data_;
  uint64_t base_ = 0;
  size_t pos_ = 0;
  size_t fail_pos_ = 0;
  bool failed_ = false;
};

} // namespace ehelf
