// Reading a whole file from a descriptor into memory (pread from offset 0, EINTR retried), one
// read(2) retried on EINTR, and writing a whole buffer to a descriptor.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <sys/types.h>

#include "support/result.hpp"

namespace ehelf {

// Fills `out` with the first out.size() bytes of `fd`; an error if the file is shorter (it
// shrank since it was measured) or a read fails. The caller adds the file name.
Status read_fully(int fd, std::span<uint8_t> out);

// read(2) at `fd`'s position, again when a signal interrupts it: the bytes read (at most
// `size`), 0 at the end, -1 on an error (errno says which).
ssize_t read_retrying(int fd, void* into, size_t size);

// Writes all of `data` at `fd`'s position (short writes continued, EINTR retried); false when a
// write fails (errno says why).
bool write_fully(int fd, std::string_view data);

} // namespace ehelf
