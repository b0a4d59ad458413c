// The three ways the runtime reads the memory of the program being unwound.
//
//   LocalMemory:   this process; reads only inside ranges known to be readable (the thread's
//                  stack, plus any added, or copies of another's), so a corrupt stack can never
//                  make us fault. The fast walk (Unwinder::backtrace_direct) reads these.
//   SnapshotMemory: a copy of a stack (a perf sample): reads inside the copy only.
//   ProcessMemory: another process (process_vm_readv, falling back to PTRACE_PEEKDATA).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <sys/types.h>
#include <vector>

#include "model/memory_reader.hpp"

namespace ehelf {

struct AddressRange {
  uint64_t begin = 0;
  uint64_t end = 0; // exclusive
  bool contains(uint64_t addr, size_t size) const {
    return addr >= begin && addr <= end && end - addr >= size;
  }
};

// The calling thread's stack: the mapping holding its stack pointer (/proc/self/maps, read with
// plain system calls; cached per thread, read again when the stack pointer leaves it).
// Async-signal-safe: a thread's first call may be in a signal handler.
AddressRange current_thread_stack();
// The same for code running elsewhere (a walk on a stack of its own) on behalf of code whose
// stack pointer is `sp`.
AddressRange thread_stack_at(uint64_t sp);

// Reads this process's memory with process_vm_readv on itself: a read of memory that is not
// mapped (a library being unmapped by another thread) fails instead of faulting.
// Async-signal-safe. False when the read failed or was short.
bool read_own_memory(uint64_t addr, void* out, size_t size);

// A range of the unwound address space whose bytes this process can read directly, at
// address + delta (0 for this process's own memory; for a copy of another stack, such as a perf
// sample's, the copy's address minus the original's).
struct DirectRange {
  uint64_t begin;
  uint64_t end; // exclusive
  int64_t delta;
};

class LocalMemory final : public MemoryReader {
public:
  static constexpr size_t kMaxRanges = 8;
  LocalMemory() = default;
  explicit LocalMemory(AddressRange stack) { add(stack); }
  // Adds a readable range (e.g. an alternate signal stack). Returns false when full.
  bool add(AddressRange r, int64_t delta = 0) {
    if (count_ == kMaxRanges || r.end <= r.begin) return false;
    ranges_[count_++] = DirectRange{r.begin, r.end, delta};
    return true;
  }
  bool read(uint64_t addr, void* out, size_t size) override {
    for (size_t i = 0; i < count_; ++i) {
      const DirectRange& d = ranges_[i];
      if (addr >= d.begin && addr <= d.end && d.end - addr >= size) {
        copy(out, addr + static_cast<uint64_t>(d.delta), size);
        return true;
      }
    }
    return false;
  }
  std::span<const DirectRange> ranges() const { return {ranges_, count_}; }

  // memcpy, with the unwinder's usual 8-byte read inlined rather than a call. Not checked by
  // AddressSanitizer: a walk reads saved registers and return addresses inside instrumented
  // frames, next to their redzones, which is what an unwinder is for (the range check of the
  // caller is this read's guard).
  __attribute__((no_sanitize("address"))) static void copy(void* out, uint64_t from, size_t size) {
    if (size == 8) {
      uint64_t v;
      __builtin_memcpy(&v, reinterpret_cast<const void*>(from), 8);
      __builtin_memcpy(out, &v, 8);
      return;
    }
    auto* dst = static_cast<uint8_t*>(out);
    size_t i = 0;
    // Word by word (a row's save slots read at once); the empty asm keeps the compiler from
    // making the loop a call to memcpy, which AddressSanitizer would check.
    for (; i + 8 <= size; i += 8) {
      uint64_t v;
      __builtin_memcpy(&v, reinterpret_cast<const void*>(from + i), 8);
      asm volatile("" : "+r"(v));
      __builtin_memcpy(dst + i, &v, 8);
    }
    const auto* src = reinterpret_cast<const volatile uint8_t*>(from);
    for (; i < size; ++i)
      dst[i] = src[i];
  }

private:
  DirectRange ranges_[kMaxRanges]; // left uninitialised beyond count_: built per walk, cheaply
  size_t count_ = 0;
};

class SnapshotMemory final : public MemoryReader {
public:
  // `bytes` is a copy of the memory that was at [base, base + bytes.size()).
  SnapshotMemory(uint64_t base, std::span<const uint8_t> bytes) : base_(base), bytes_(bytes) {}
  bool read(uint64_t addr, void* out, size_t size) override {
    if (addr < base_ || addr - base_ > bytes_.size() || bytes_.size() - (addr - base_) < size)
      return false;
    LocalMemory::copy(out, reinterpret_cast<uint64_t>(bytes_.data()) + (addr - base_), size);
    return true;
  }

private:
  uint64_t base_;
  std::span<const uint8_t> bytes_;
};

class ProcessMemory final : public MemoryReader {
public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}
  bool read(uint64_t addr, void* out, size_t size) override;
  pid_t pid() const { return pid_; }

private:
  pid_t pid_;
  bool use_peek_ = false; // process_vm_readv refused (e.g. no permission): ptrace word reads
};

} // namespace ehelf
