// MemoryReader: how evaluation reads memory. Implementations may refuse any read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ehelf {

class MemoryReader {
public:
  virtual ~MemoryReader() = default;
  // Copies `size` bytes at `addr` into `out`; returns false (and leaves `out` unspecified) if the
  // range is not readable. Must never fault.
  virtual bool read(uint64_t addr, void* out, size_t size) = 0;

  bool read_u64(uint64_t addr, uint64_t& out) { return read(addr, &out, sizeof out); }
};

// Refuses every read: for evaluating rules that must not touch memory.
class NoMemory final : public MemoryReader {
public:
  bool read(uint64_t, void*, size_t) override { return false; }
};

} // namespace ehelf
