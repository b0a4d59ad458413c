#include "eh_elf/eh_elf_object.hpp"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "eh_elf/eh_elf_check.hpp"
#include "support/read_fully.hpp"

namespace ehelf {
namespace {

// Far larger than any compiled object (libc's is 260 KiB); the whole file is read to check it.
constexpr off_t kMaxEhElfBytes = off_t(1) << 30;

Result<std::vector<uint8_t>> read_regular_file(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error::plain(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Error::plain("not a regular file");
  if (st.st_size > kMaxEhElfBytes) return Error::plain("too large for an eh_elf");
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  if (auto read = read_fully(fd, bytes); !read) return std::move(read).error();
  return bytes;
}

} // namespace

Result<std::unique_ptr<EhElfObject>> EhElfObject::load(const std::string& path,
                                                       std::span<const uint8_t> expected) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused as not regular).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error::plain(std::strerror(errno)).in_file(path);
  return load_fd(fd, path, expected);
}

Result<std::unique_ptr<EhElfObject>> EhElfObject::load_fd(int fd, const std::string& path,
                                                          std::span<const uint8_t> expected) {
  std::unique_ptr<EhElfObject> o(new EhElfObject);
  o->fd_ = fd;
  auto bytes = read_regular_file(fd);
  if (!bytes) return std::move(bytes).error().in_file(path);
  if (auto st = check_eh_elf_image(*bytes); !st) return std::move(st).error().in_file(path);
  std::string self = fmt::format("/proc/self/fd/{}", fd);
  o->handle_ = ::dlopen(self.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!o->handle_)
    return Error::plain(fmt::format("cannot load eh_elf: {}", ::dlerror())).in_file(path);
  void* h = o->handle_;
  o->info_ = static_cast<const ehelf_info*>(::dlsym(h, EHELF_INFO_SYMBOL));
  o->local_ =
      reinterpret_cast<int (*)(uint64_t, ehelf_context_t*)>(::dlsym(h, EHELF_UNWIND_LOCAL_SYMBOL));
  o->remote_ = reinterpret_cast<int (*)(uint64_t, ehelf_context_t*, ehelf_deref_fn, void*)>(
      ::dlsym(h, EHELF_UNWIND_REMOTE_SYMBOL));
  if (!o->info_ || !o->local_ || !o->remote_)
    return Error::plain("not an eh_elf (missing exported symbols)").in_file(path);
  if (o->info_->abi_version != EHELF_ABI_VERSION)
    return Error::plain(fmt::format("eh_elf ABI version {} (this ehelf uses {})",
                                    o->info_->abi_version, EHELF_ABI_VERSION))
        .in_file(path);
  if (!expected.empty() && (o->info_->build_id_size != expected.size() ||
                            std::memcmp(o->info_->build_id, expected.data(), expected.size()) != 0))
    return Error::plain("eh_elf was compiled from a different file (build-id mismatch)")
        .in_file(path);
  return o;
}

EhElfObject::~EhElfObject() {
  if (handle_) ::dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

} // namespace ehelf
