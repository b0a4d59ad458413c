#include "support/output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <streambuf>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "support/read_fully.hpp"
#include "support/read_text_file.hpp"

namespace ehelf {
namespace {

// The process's umask without changing it (umask(2) can only be read by setting it, which would
// race with any thread creating a file): /proc/self/status says it since Linux 4.7.
mode_t current_umask() {
  if (auto status = read_text_file("/proc/self/status", 1 << 16)) {
    const size_t at = status->find("\nUmask:");
    if (at != std::string::npos)
      return static_cast<mode_t>(std::strtoul(status->c_str() + at + 7, nullptr, 8)) & 0777;
  }
  return 022;
}

// What a non-regular file at an output path is, for the refusal.
const char* kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link (neither followed nor replaced)";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// "PATH: refusing to write it: it is a FIFO", whatever input the command was reading.
Error refusal(const std::string& path, mode_t mode) {
  return Error::plain(fmt::format("refusing to write it: it is {}", kind_of(mode))).in_file(path);
}

Error failure(const std::string& path, int err) {
  return Error::plain(fmt::format("cannot write it: {}", std::strerror(err))).in_file(path);
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A new file with an unpredictable name in `dir`, readable and writable by its owner only until
// commit gives it its mode. O_EXCL: a name that exists (a link planted there) is never opened.
int create_temporary(const std::string& dir, std::string& name) {
  static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (int attempt = 0; attempt < 64; ++attempt) {
    unsigned char random[12];
    if (::getrandom(random, sizeof random, 0) != sizeof random) return -1;
    name = dir + "/.ehelf-out-";
    for (unsigned char r : random)
      name += kLetters[r % (sizeof kLetters - 1)];
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

// The buffer behind OutputFile::stream(): whole buffers go to the descriptor; the first failure's
// errno is kept for commit().
class DescriptorBuffer : public std::streambuf {
public:
  explicit DescriptorBuffer(int& fd, int& error) : fd_(fd), error_(error), buffer_(1 << 16) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }

  bool drain() {
    const std::string_view pending(pbase(), static_cast<size_t>(pptr() - pbase()));
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    if (pending.empty() || error_) return !error_;
    if (!write_fully(fd_, pending)) error_ = errno ? errno : EIO;
    return !error_;
  }

protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

private:
  int& fd_;
  int& error_;
  std::vector<char> buffer_;
};

} // namespace

struct OutputFile::State {
  std::string path;
  std::string temporary; // empty for a device
  int fd = -1;
  int error = 0; // errno of the first failed write
  mode_t mode = 0;
  DescriptorBuffer buffer{fd, error};
  std::ostream stream{&buffer};

  ~State() {
    if (fd >= 0) ::close(fd);
    if (!temporary.empty()) ::unlink(temporary.c_str());
  }
};

OutputFile::OutputFile(std::unique_ptr<State> state) : state_(std::move(state)) {}
OutputFile::OutputFile(OutputFile&&) noexcept = default;
OutputFile& OutputFile::operator=(OutputFile&&) noexcept = default;
OutputFile::~OutputFile() = default;

const std::string& OutputFile::path() const {
  return state_->path;
}

bool OutputFile::is_device() const {
  return state_->temporary.empty();
}

Result<OutputFile> OutputFile::create(const std::string& path, const OutputOptions& options) {
  if (path.empty()) return Error::plain("the output path is empty").in_file("-o");
  if (path.back() == '/') return refusal(path, S_IFDIR);
  auto state = std::make_unique<State>();
  state->path = path;
  state->mode = options.mode & 0777 & ~current_umask();
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode)) {
      // O_NONBLOCK for the open only: should the path have become a FIFO since, it cannot block.
      state->fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
      if (state->fd < 0) return failure(path, errno);
      struct stat opened {};
      if (::fstat(state->fd, &opened) != 0 || !S_ISCHR(opened.st_mode))
        return refusal(path, opened.st_mode);
      ::fcntl(state->fd, F_SETFL, ::fcntl(state->fd, F_GETFL) & ~O_NONBLOCK);
      return OutputFile(std::move(state));
    }
    if (!S_ISREG(st.st_mode)) return refusal(path, st.st_mode);
  } else if (errno != ENOENT) {
    return failure(path, errno);
  }
  state->fd = create_temporary(directory_of(path), state->temporary);
  if (state->fd < 0) {
    const int err = errno;
    state->temporary.clear(); // nothing was created
    return failure(path, err);
  }
  return OutputFile(std::move(state));
}

Status OutputFile::write(std::string_view bytes) {
  State& s = *state_;
  s.buffer.drain(); // what the stream holds comes first
  if (!s.error && !write_fully(s.fd, bytes)) s.error = errno ? errno : EIO;
  if (s.error) return failure(s.path, s.error);
  return Ok{};
}

std::ostream& OutputFile::stream() {
  return state_->stream;
}

Status OutputFile::commit() {
  State& s = *state_;
  s.stream.flush();
  s.buffer.drain();
  if (s.error) return failure(s.path, s.error);
  if (s.temporary.empty()) return Ok{}; // a device: written, nothing to replace
  if (::fsync(s.fd) != 0 || ::fchmod(s.fd, s.mode) != 0) return failure(s.path, errno);
  if (::close(s.fd) != 0) {
    s.fd = -1;
    return failure(s.path, errno);
  }
  s.fd = -1;
  // Checked again just before the rename: what appeared at the path while the output was
  // written is refused as it would have been at the start.
  struct stat st {};
  if (::lstat(s.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return refusal(s.path, st.st_mode);
  if (::rename(s.temporary.c_str(), s.path.c_str()) != 0) return failure(s.path, errno);
  s.temporary.clear();
  return Ok{};
}

Status write_output_file(const std::string& path, std::string_view bytes,
                         const OutputOptions& options) {
  auto out = OutputFile::create(path, options);
  if (!out) return std::move(out).error();
  if (Status s = out->write(bytes); !s) return s;
  return out->commit();
}

} // namespace ehelf
