#include "compile/toolchain.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace ehelf {
namespace {

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

} // namespace

Status build_shared_object(const std::string& source, const std::string& output,
                           const ToolchainOptions& options) {
  std::string compiler = options.compiler;
  if (compiler.empty()) {
    const char* env = std::getenv("EHELF_CC");
    compiler = env && *env ? env : "cc";
  }
  std::string tmp_so = output + fmt::format(".tmp{}", ::getpid());
  std::string c_path = options.keep_source ? output + ".c" : tmp_so + ".c";
  std::string log_path = tmp_so + ".log";
  int fd = ::open(c_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error::plain(fmt::format("cannot write {}: {}", c_path, std::strerror(errno)));
  bool ok = write_all(fd, source);
  ::close(fd);
  if (!ok) return Error::plain(fmt::format("cannot write {}", c_path));

  // No libc: the generated code calls nothing. -fno-jump-tables is not wanted: the body switch
  // is meant to become a jump table.
  std::vector<std::string> args = {compiler,        options.optimization, "-fPIC",
                                   "-shared",       "-nostdlib",          "-fvisibility=hidden",
                                   "-fno-plt",      "-w",                 "-Wl,-z,noexecstack",
                                   "-Wl,--hash-style=gnu", "-Wl,-O1",     "-o",
                                   tmp_so,          "-x",                 "c",
                                   c_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, compiler.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  auto cleanup = [&] {
    if (!options.keep_source) ::unlink(c_path.c_str());
    ::unlink(log_path.c_str());
  };
  if (rc != 0) {
    cleanup();
    return Error::plain(fmt::format("cannot run {}: {}", compiler, std::strerror(rc)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string log;
    if (FILE* f = std::fopen(log_path.c_str(), "r")) {
      char buf[512];
      size_t n = std::fread(buf, 1, sizeof buf - 1, f);
      log.assign(buf, n);
      std::fclose(f);
    }
    for (char& ch : log)
      if (ch == '\n') ch = ' ';
    cleanup();
    ::unlink(tmp_so.c_str());
    return Error::plain(fmt::format("{} failed: {}", compiler, log));
  }
  cleanup();
  if (::rename(tmp_so.c_str(), output.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_so.c_str());
    return Error::plain(fmt::format("cannot create {}: {}", output, std::strerror(e)));
  }
  return Ok{};
}

} // namespace ehelf
