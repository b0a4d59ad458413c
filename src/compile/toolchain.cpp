#include "compile/toolchain.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <optional>
#include <signal.h>
#include <string_view>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "support/output_file.hpp"
#include "support/read_fully.hpp"
#include "support/read_text_file.hpp"

extern char** environ;

namespace ehelf {
namespace {

// A private directory next to the output for the source, the log and the object being built:
// mkdtemp makes it 0700 under an unpredictable name, so no other user can plant anything in it
// (a symbolic link at a temporary's name, say). Removed with everything in it on every path.
class ScratchDir {
public:
  explicit ScratchDir(const std::string& directory) {
    std::string tmpl = directory + ".ehelf-tmp-XXXXXX";
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          ::unlinkat(::dirfd(d), e->d_name, 0);
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string operator/(const char* name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

bool write_new_file(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool written = write_fully(fd, data);
  return ::close(fd) == 0 && written;
}

// The executable `name` runs as, searched in $PATH when it has no slash (before fork: the child
// may only make async-signal-safe calls).
std::string find_executable(const std::string& name) {
  auto runnable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return runnable(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = (end > at ? dirs.substr(at, end - at) : ".") + "/" + name;
    if (runnable(candidate)) return candidate;
    at = end + 1;
  }
  return {};
}

// In the keeper process (below): the whole process group, the compiler and all it started, dies.
void kill_own_group(int) {
  ::kill(0, SIGKILL);
}

struct Child {
  const char* exe;
  char* const* argv;
  const char* cwd;
  int log_fd;
  int null_fd;
  rlim_t cpu_seconds;
  rlim_t memory_bytes;
  pid_t parent;
};

// In the forked processes: says what failed in the compiler's log (write(2) only: async-signal
// safe), which ehelf quotes, and exits.
[[noreturn]] void fail_in_child(int log_fd, std::string_view what, int code = 126) {
  [[maybe_unused]] ssize_t n = ::write(log_fd, what.data(), what.size());
  ::_exit(code);
}

// Runs in the forked child: only async-signal-safe calls. The child becomes a keeper leading its
// own process group; it dies with ehelf (PR_SET_PDEATHSIG sends it SIGTERM, on which it kills
// its group), and runs the compiler under the limits, which the compiler's own children inherit.
[[noreturn]] void run_keeper(const Child& c) {
  ::setpgid(0, 0);
  struct sigaction sa {};
  sa.sa_handler = kill_own_group;
  ::sigaction(SIGTERM, &sa, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != c.parent) kill_own_group(0); // ehelf died before prctl
  pid_t cc = ::fork();
  if (cc == 0) {
    sa.sa_handler = SIG_DFL;
    ::sigaction(SIGTERM, &sa, nullptr);
    rlimit cpu{c.cpu_seconds, c.cpu_seconds}, mem{c.memory_bytes, c.memory_bytes};
    if (::setrlimit(RLIMIT_CPU, &cpu) != 0) fail_in_child(c.log_fd, "setrlimit(RLIMIT_CPU) failed");
    if (::setrlimit(RLIMIT_AS, &mem) != 0) fail_in_child(c.log_fd, "setrlimit(RLIMIT_AS) failed");
    if (::chdir(c.cwd) != 0) fail_in_child(c.log_fd, "cannot enter the scratch directory");
    ::dup2(c.null_fd, 0);
    ::dup2(c.log_fd, 1);
    ::dup2(c.log_fd, 2);
    ::execve(c.exe, c.argv, environ);
    fail_in_child(c.log_fd, "execve failed", 127);
  }
  int status = 0;
  while (cc > 0 && ::waitpid(cc, &status, 0) < 0)
    if (errno != EINTR) fail_in_child(c.log_fd, "waitpid failed");
  if (cc < 0) fail_in_child(c.log_fd, "fork failed");
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

rlim_t hard_limit(int resource) {
  rlimit now{};
  return ::getrlimit(resource, &now) == 0 ? now.rlim_max : RLIM_INFINITY;
}

// The compiler's exit code (128 + N: killed by signal N), or an error.
Result<int> run_compiler(const std::string& exe, const std::vector<std::string>& args,
                         const std::string& cwd, const std::string& log_path,
                         const ToolchainOptions& options) {
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) {
    int e = errno;
    if (log_fd >= 0) ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    return Error::plain(fmt::format("cannot create {}: {}", log_path, std::strerror(e)));
  }
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // The limits, but never above the hard limits ehelf runs under: an unprivileged process cannot
  // raise those, and the child's setrlimit would fail.
  Child c{exe.c_str(),
          argv.data(),
          cwd.c_str(),
          log_fd,
          null_fd,
          std::min<rlim_t>(options.cpu_seconds, hard_limit(RLIMIT_CPU)),
          std::min<rlim_t>(options.memory_bytes, hard_limit(RLIMIT_AS)),
          ::getpid()};
  pid_t pid = ::fork();
  if (pid == 0) run_keeper(c);
  int fork_errno = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0)
    return Error::plain(fmt::format("cannot run {}: {}", exe, std::strerror(fork_errno)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Error::plain(fmt::format("waitpid: {}", std::strerror(errno)));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// $TMPDIR (when absolute), else /tmp, with a slash at the end.
std::string temporary_directory() {
  const char* env = ::secure_getenv("TMPDIR");
  std::string dir = env && env[0] == '/' ? env : "/tmp";
  return dir.back() == '/' ? dir : dir + "/";
}

// The object the compiler made, whole (at most 1 GiB: a bounded input makes far less).
std::optional<std::string> read_whole_file(const std::string& path) {
  return read_text_file(path, size_t(1) << 30, O_NOFOLLOW);
}

std::string first_bytes(const std::string& path, size_t n) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    s.resize(n);
    s.resize(std::fread(s.data(), 1, n, f));
    std::fclose(f);
  }
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s;
}

} // namespace

Status build_shared_object(const std::string& source, const std::string& output,
                           const ToolchainOptions& options,
                           const std::function<Status(const std::string& built)>& inspect) {
  std::string compiler = options.compiler;
  if (compiler.empty()) {
    const char* env = ::secure_getenv("EHELF_CC");
    compiler = env && *env ? env : "cc";
  }
  // The flag is one argument, never parsed by a shell; still, only these reach the compiler.
  static constexpr const char* kLevels[] = {"-O0", "-O1", "-O2", "-O3", "-Os"};
  if (std::none_of(std::begin(kLevels), std::end(kLevels),
                   [&](const char* l) { return options.optimization == l; }))
    return Error::plain(fmt::format("unknown optimization flag {}", options.optimization));
  std::string exe = find_executable(compiler);
  if (exe.empty()) return Error::plain(fmt::format("cannot find the C compiler {}", compiler));
  // Refused (a link, a directory, a FIFO...) before the compiler runs. An object is a file that
  // is loaded and run: 0755 at most, whatever the umask, since an object writable by group or
  // others would be refused by the runtime.
  auto out = OutputFile::create(output, {.mode = 0755});
  if (!out) return std::move(out).error();
  // Next to the output, unless that is a device (/dev/null): no directory is made under /dev.
  ScratchDir scratch(out->is_device() ? temporary_directory()
                                      : output.substr(0, output.rfind('/') + 1));
  if (!scratch.ok())
    return Error::plain(fmt::format("cannot create a temporary directory next to {}: {}", output,
                                    std::strerror(errno)));
  std::string c_path = scratch / "eh_elf.c", so_path = scratch / "eh_elf.so";
  if (!write_new_file(c_path, source))
    return Error::plain(fmt::format("cannot write {}: {}", c_path, std::strerror(errno)));

  // No libc: the generated code calls nothing. -fno-jump-tables is not wanted: the body switch
  // is meant to become a jump table. Relative names, run in the scratch directory: the object
  // does not depend on where it was built.
  std::vector<std::string> args = {compiler,
                                   options.optimization,
                                   "-fPIC",
                                   "-shared",
                                   "-nostdlib",
                                   "-fvisibility=hidden",
                                   "-fno-plt",
                                   "-w",
                                   "-Wl,-z,noexecstack",
                                   "-Wl,--hash-style=gnu",
                                   "-Wl,-O1",
                                   "-o",
                                   "eh_elf.so",
                                   "-x",
                                   "c",
                                   "eh_elf.c"};
  std::string log_path = scratch / "cc.log";
  auto status = run_compiler(exe, args, scratch / "", log_path, options);
  if (!status) return std::move(status).error();
  if (*status == 128 + SIGXCPU || *status == 128 + SIGKILL)
    return Error::plain(fmt::format("{} was stopped by its limit of {} s of CPU time", compiler,
                                    options.cpu_seconds));
  if (*status != 0) {
    const std::string said = first_bytes(log_path, 511);
    return Error::plain(
        fmt::format("{} failed: {}", compiler,
                    said.empty() ? fmt::format("exit status {}, no message", *status) : said));
  }
  auto object = read_whole_file(so_path);
  if (!object) return Error::plain(fmt::format("{} made no {}", compiler, so_path));
  if (inspect)
    if (Status s = inspect(so_path); !s) return s;
  if (options.keep_source)
    if (Status s = write_output_file(output + ".c", source); !s) return s;
  // Atomic: a reader sees the old object or the new one, never a partial one.
  if (Status s = out->write(*object); !s) return s;
  return out->commit();
  return Ok{};
}

} // namespace ehelf
