#include "eh_elf/eh_elf_cache.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <mutex>
#include <set>
#include <sys/auxv.h>
#include <unistd.h>

namespace ehelf {
namespace {

// One line per refused file and process: a module map is rebuilt for every process unwound.
void report_refusal(const std::string& what, const std::string& reason) {
  static std::mutex lock;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> g(lock);
  if (reported.insert(what).second)
    std::fprintf(stderr, "ehelf: refusing %s: %s; unwinding with the tables\n", what.c_str(),
                 reason.c_str());
}

std::string to_hex(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t b : bytes)
    s += fmt::format("{:02x}", b);
  return s;
}

const char* absolute_env(const char* name) {
  const char* v = ::secure_getenv(name);
  return v && v[0] == '/' ? v : nullptr;
}

// Why a directory above the cache is not trusted, or an empty string: whoever can write to one
// could put another directory in the cache's place. Each must be owned by the effective user or
// root and not writable by group or others, unless sticky (as /tmp: others cannot rename what is
// not theirs).
std::string untrusted_ancestor(const std::string& dir) {
  char* real = ::realpath(dir.c_str(), nullptr);
  if (!real) return std::strerror(errno);
  std::string path = real;
  std::free(real);
  while (path.size() > 1) {
    path.resize(std::max<size_t>(path.rfind('/'), 1));
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
    if (st.st_uid != ::geteuid() && st.st_uid != 0)
      return fmt::format("its parent {} is owned by uid {}", path, st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return fmt::format("its parent {} is writable by group or others (mode {:04o})", path,
                         st.st_mode & 07777);
  }
  return {};
}

// Opens the cache directory and checks it and the directories above it; -1 when there is none
// or it is refused.
int open_cache_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) report_refusal("the eh_elf cache " + dir, std::strerror(errno));
    return -1;
  }
  struct stat st {};
  std::string why = ::fstat(fd, &st) != 0 ? std::strerror(errno) : untrusted_owner_or_mode(st);
  if (why.empty()) why = untrusted_ancestor(dir);
  if (!why.empty()) {
    report_refusal("the eh_elf cache " + dir, why);
    ::close(fd);
    return -1;
  }
  return fd;
}

} // namespace

std::optional<std::string> cache_directory() {
  if (::getauxval(AT_SECURE)) return std::nullopt;
  if (const char* env = ::secure_getenv("EHELF_CACHE"); env && *env) return std::string(env);
  if (const char* xdg = absolute_env("XDG_CACHE_HOME")) return std::string(xdg) + "/ehelf";
  if (const char* home = absolute_env("HOME")) return std::string(home) + "/.cache/ehelf";
  return std::nullopt;
}

std::string cache_file_name(const std::string& build_id_hex, RegisterSet registers) {
  return fmt::format("{}.{}.so", build_id_hex,
                     registers == RegisterSet::Minimal ? "minimal" : "callee-saved");
}

std::string untrusted_owner_or_mode(const struct stat& st) {
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return fmt::format("owned by uid {}, not by uid {} or root", st.st_uid, ::geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fmt::format("writable by group or others (mode {:04o})", st.st_mode & 07777);
  return {};
}

Result<std::string> prepare_cache_directory() {
  auto dir = cache_directory();
  if (!dir)
    return Error::plain("no cache directory: set EHELF_CACHE, XDG_CACHE_HOME or HOME (a "
                        "privileged process has none)");
  for (size_t i = 1; i <= dir->size(); ++i)
    if (i == dir->size() || (*dir)[i] == '/')
      if (::mkdir(dir->substr(0, i).c_str(), 0700) != 0 && errno != EEXIST)
        return Error::plain(
                   fmt::format("cannot create the cache directory: {}", std::strerror(errno)))
            .in_file(*dir);
  struct stat st {};
  if (::stat(dir->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error::plain("the cache is not a directory").in_file(*dir);
  std::string why = untrusted_owner_or_mode(st);
  if (why.empty()) why = untrusted_ancestor(*dir);
  if (!why.empty())
    return Error::plain("cannot use this eh_elf cache (the runtime would refuse it): " + why)
        .in_file(*dir);
  return *dir;
}

std::unique_ptr<EhElfObject> load_cached_eh_elf(std::span<const uint8_t> build_id,
                                                RegisterSet registers) {
  auto dir = cache_directory();
  if (!dir || build_id.empty()) return nullptr;
  int dfd = open_cache_directory(*dir);
  if (dfd < 0) return nullptr;
  std::string name = cache_file_name(to_hex(build_id), registers);
  std::string path = *dir + "/" + name;
  // O_NOFOLLOW: a symbolic link is refused (ELOOP); O_NONBLOCK: a FIFO cannot hang the open.
  int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  int open_errno = errno;
  ::close(dfd);
  if (fd < 0) {
    if (open_errno != ENOENT)
      report_refusal(path, open_errno == ELOOP ? "a symbolic link" : std::strerror(open_errno));
    return nullptr;
  }
  struct stat st {};
  std::string why = ::fstat(fd, &st) != 0  ? std::strerror(errno)
                    : !S_ISREG(st.st_mode) ? "not a regular file"
                                           : untrusted_owner_or_mode(st);
  if (!why.empty()) {
    ::close(fd);
    report_refusal(path, why);
    return nullptr;
  }
  auto object = EhElfObject::load_fd(fd, path, build_id);
  if (!object) {
    report_refusal(path, object.error().message);
    return nullptr;
  }
  return std::move(*object);
}

} // namespace ehelf
