// Reading a whole file from a descriptor into memory (pread from offset 0, EINTR retried).
#pragma once

#include <cstdint>
#include <span>

#include "support/result.hpp"

namespace ehelf {

// Fills `out` with the first out.size() bytes of `fd`; an error if the file is shorter (it
// shrank since it was measured) or a read fails. The caller adds the file name.
Status read_fully(int fd, std::span<uint8_t> out);

} // namespace ehelf
