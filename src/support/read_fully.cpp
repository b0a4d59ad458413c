#include "support/read_fully.hpp"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace ehelf {

Status read_fully(int fd, std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::plain(std::strerror(errno));
    if (n == 0) return Error::plain("the file shrank while being read");
    done += static_cast<size_t>(n);
  }
  return Ok{};
}

ssize_t read_retrying(int fd, void* into, size_t size) {
  for (;;)
    if (const ssize_t n = ::read(fd, into, size); n >= 0 || errno != EINTR) return n;
}

bool write_fully(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

} // namespace ehelf
