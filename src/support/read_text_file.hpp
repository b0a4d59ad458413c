// Reading a whole text file by path, bounded: kallsyms copies, JIT perf maps, /proc files.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <sys/stat.h>

namespace ehelf {

// The whole of the regular file at `path`, at most `max` bytes. Files whose size stat does not
// tell (/proc files say 0) are read until their end all the same. nullopt when the file cannot be
// opened, is not a regular file (a FIFO never blocks the open: O_NONBLOCK), is refused by
// `accept` (its fstat, e.g. an owner check), is larger than `max`, or a read fails.
// `open_flags` add to O_RDONLY | O_CLOEXEC | O_NONBLOCK (O_NOFOLLOW, say).
std::optional<std::string>
read_text_file(const std::string& path, size_t max, int open_flags = 0,
               const std::function<bool(const struct stat&)>& accept = {});

} // namespace ehelf
