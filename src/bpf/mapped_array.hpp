// A BPF array map's values, mapped writable into this process (BPF_F_MMAPABLE): tables and
// mappings are written in place, no system call per entry.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "support/result.hpp"

namespace ehelf::bpf {

template <class T> struct MappedArray {
  T* values = nullptr;
  size_t count = 0, bytes = 0;
  Status map(int fd, size_t entries, const char* what) {
    bytes = (entries * sizeof(T) + 4095) & ~size_t(4095);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      return Error::plain(fmt::format("cannot map the BPF {} map: {}", what, std::strerror(errno)));
    values = static_cast<T*>(p);
    count = entries;
    return Ok{};
  }
  MappedArray() = default;
  MappedArray(const MappedArray&) = delete;
  MappedArray& operator=(const MappedArray&) = delete;
  ~MappedArray() {
    if (values) ::munmap(values, bytes);
  }
};

} // namespace ehelf::bpf
