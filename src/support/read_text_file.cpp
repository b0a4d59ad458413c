#include "support/read_text_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <unistd.h>

#include "support/read_fully.hpp"

namespace ehelf {

std::optional<std::string> read_text_file(const std::string& path, size_t max, int open_flags,
                                          const std::function<bool(const struct stat&)>& accept) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | open_flags);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= max &&
      (!accept || accept(st))) {
    text.emplace();
    size_t used = 0;
    // One byte more than the size, so that the read finding the end needs no growth; 64 KiB
    // reads for /proc files, which format as much as each read asks for (a process's maps fit
    // in one; a megabyte zero-filled for each was a tenth of record's time in an exec storm).
    text->resize(st.st_size ? static_cast<size_t>(st.st_size) + 1
                            : std::min(max, size_t(1) << 16) + 1);
    while (true) {
      if (used == text->size()) {
        if (text->size() > max) { // more than `max` bytes
          text.reset();
          break;
        }
        text->resize(std::min(max + 1, text->size() * 2));
      }
      const ssize_t n = read_retrying(fd, text->data() + used, text->size() - used);
      if (n < 0) {
        text.reset();
        break;
      }
      if (n == 0) break;
      used += static_cast<size_t>(n);
    }
    if (text) text->resize(used);
  }
  ::close(fd);
  return text;
}

} // namespace ehelf
