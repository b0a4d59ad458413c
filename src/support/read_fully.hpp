// Reading a whole file from a descriptor into memory (pread from offset 0, EINTR retried), and
// writing a whole buffer to one.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "support/result.hpp"

namespace ehelf {

// Fills `out` with the first out.size() bytes of `fd`; an error if the file is shorter (it
// shrank since it was measured) or a read fails. The caller adds the file name.
Status read_fully(int fd, std::span<uint8_t> out);

// Writes all of `data` at `fd`'s position (short writes continued, EINTR retried); false when a
// write fails (errno says why).
bool write_fully(int fd, std::string_view data);

} // namespace ehelf
