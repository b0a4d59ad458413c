// RingBuffer: one perf_event mmap ring (the kernel writes records at data_head, we consume at
// data_tail) read without copying: each whole record between tail and head is handed out where
// it lies, except one that wraps around the end of the ring, which is copied into a scratch
// buffer first. The tail moves only when the caller says the records are done with, so their
// bytes (a sample's user stack copy included) stay valid while they are unwound.
//
// The kernel's side is trusted as far as the mapping goes and no further: a record whose size
// is below 8 bytes, larger than the ring or runs past the head, or a tail that is unaligned or
// more than a ring from the head, marks the ring corrupt (the rest of what is there is
// dropped and counted), never a read outside the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "support/result.hpp"

struct perf_event_mmap_page;

namespace ehelf::record {

class RingBuffer {
public:
  // Maps the ring of perf event `fd`: one metadata page and `data_pages` (a power of two).
  static Result<RingBuffer> map(int fd, size_t data_pages);
  // A ring in memory the caller owns and writes (tests, fuzzing): `meta`'s data_head and
  // data_tail, `data` of `size` bytes (a power of two).
  static RingBuffer view(perf_event_mmap_page* meta, const uint8_t* data, size_t size);
  RingBuffer(RingBuffer&& o) noexcept;
  RingBuffer& operator=(RingBuffer&&) = delete;
  RingBuffer(const RingBuffer&) = delete;
  ~RingBuffer();

  // Every whole record written since the last release(), in order, as the bytes of the record
  // (its 8-byte header first). Valid until release().
  std::span<const std::span<const uint8_t>> pending();
  // Gives the records returned by pending() back to the kernel.
  void release() { release(records_.size()); }
  // Gives back the first `count` of them; the others are pending() again.
  void release(size_t count);

  size_t data_size() const { return size_; }
  uint64_t corrupt_bytes() const { return corrupt_bytes_; }

private:
  RingBuffer() = default;

  void* base_ = nullptr;
  size_t mapped_ = 0;
  perf_event_mmap_page* meta_ = nullptr;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;        // of the data area, a power of two
  uint64_t read_to_ = 0;   // where the next pending() reads from (the tail given back)
  uint64_t round_end_ = 0; // where the last pending() stopped
  uint64_t corrupt_bytes_ = 0;
  std::vector<std::span<const uint8_t>> records_;
  std::vector<uint64_t> ends_;   // where each of records_ ends in the ring
  std::vector<uint8_t> scratch_; // the one record that wraps, if any
};

} // namespace ehelf::record
