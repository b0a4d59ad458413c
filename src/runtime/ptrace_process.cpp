// The runtime's ptrace module: seizing a running process, register layout, traced programs.
#include "runtime/ptrace_process.hpp"

#include "runtime/proc_files.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <iterator>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ehelf {
namespace {

volatile sig_atomic_t g_signal = 0; // the terminating signal received while guarded
void on_terminating_signal(int sig) {
  g_signal = sig;
}
constexpr int kTerminatingSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Offset in `struct user` of each DWARF register (rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip).
constexpr size_t kUserOffset[17] = {
    offsetof(user_regs_struct, rax), offsetof(user_regs_struct, rdx),
    offsetof(user_regs_struct, rcx), offsetof(user_regs_struct, rbx),
    offsetof(user_regs_struct, rsi), offsetof(user_regs_struct, rdi),
    offsetof(user_regs_struct, rbp), offsetof(user_regs_struct, rsp),
    offsetof(user_regs_struct, r8),  offsetof(user_regs_struct, r9),
    offsetof(user_regs_struct, r10), offsetof(user_regs_struct, r11),
    offsetof(user_regs_struct, r12), offsetof(user_regs_struct, r13),
    offsetof(user_regs_struct, r14), offsetof(user_regs_struct, r15),
    offsetof(user_regs_struct, rip)};
static_assert(offsetof(struct user, regs) == 0, "user_regs_struct starts struct user");

} // namespace

size_t user_register_offset(unsigned reg) {
  return kUserOffset[reg];
}

RegisterState to_register_state(const user_regs_struct& u) {
  RegisterState r;
  for (unsigned i = 0; i < 17; ++i) {
    uint64_t v;
    std::memcpy(&v, reinterpret_cast<const char*>(&u) + kUserOffset[i], sizeof v);
    r.set(i, v);
  }
  return r;
}

TerminationGuard::TerminationGuard() {
  struct sigaction sa {};
  sa.sa_handler = on_terminating_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kTerminatingSignals); ++i) {
    ::sigaction(kTerminatingSignals[i], nullptr, &old_[i]);
    // An ignored signal (SIGINT of a background job) stays ignored.
    if (old_[i].sa_handler != SIG_IGN) ::sigaction(kTerminatingSignals[i], &sa, nullptr);
  }
}

TerminationGuard::~TerminationGuard() {
  for (size_t i = 0; i < std::size(kTerminatingSignals); ++i)
    ::sigaction(kTerminatingSignals[i], &old_[i], nullptr);
  if (g_signal) {
    std::fflush(nullptr); // what was printed before dying of the signal is kept
    ::raise(g_signal);
  }
}

int TerminationGuard::received() {
  return g_signal;
}

std::string ProcessAttachment::attach_all() {
  std::string task_dir = fmt::format("/proc/{}/task", pid_);
  for (int round = 0; round < 100; ++round) {
    auto tids = proc_threads(pid_);
    if (!tids)
      return errno == ENOENT ? "no such process"
                             : fmt::format("cannot read {}: {}", task_dir, std::strerror(errno));
    std::vector<pid_t> fresh;
    for (int tid : *tids)
      if (!seen_.count(static_cast<pid_t>(tid))) fresh.push_back(static_cast<pid_t>(tid));
    if (fresh.empty()) break;
    for (pid_t tid : fresh) {
      if (g_signal) return "interrupted";
      if (std::string err = attach(tid); !err.empty()) return err;
    }
  }
  for (const Thread& t : threads_)
    if (t.stopped) return {};
  return "no such process";
}

void ProcessAttachment::detach_all() {
  for (Thread& t : threads_)
    if (t.stopped) {
      ::ptrace(PTRACE_DETACH, t.tid, nullptr,
               reinterpret_cast<void*>(static_cast<long>(t.pending_signal)));
      t.stopped = false;
    }
}

bool ProcessAttachment::thread_gone(pid_t tid) const {
  FILE* f = std::fopen(fmt::format("/proc/{}/task/{}/stat", pid_, tid).c_str(), "r");
  if (!f) return true;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // "tid (comm) S ...": the state follows the last ')' (a comm may hold parentheses).
  const char* close = std::strrchr(buf, ')');
  if (!n || !close || close[1] != ' ') return true;
  return close[2] == 'Z' || close[2] == 'X';
}

std::string ProcessAttachment::attach(pid_t tid) {
  seen_.insert(tid);
  Thread t;
  t.tid = tid;
  if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
    int err = errno;
    // A thread that exited since the listing (ESRCH), or is exiting (EPERM while it is a zombie:
    // its task entry is gone or in state Z or X), is skipped, as eu-stack skips it.
    if (err == ESRCH || (err == EPERM && tid != pid_ && thread_gone(tid))) {
      threads_.push_back(t);
      ++skipped_;
      return {};
    }
    std::string msg = fmt::format("cannot attach to thread {}: {}", tid, std::strerror(err));
    if (err == EPERM) {
      if (FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
        int scope = 0;
        if (std::fscanf(f, "%d", &scope) == 1 && scope > 0)
          msg += fmt::format(" (kernel.yama.ptrace_scope is {})", scope);
        std::fclose(f);
      }
    }
    return msg;
  }
  threads_.push_back(t);
  Thread& seized = threads_.back();
  if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    if (errno == ESRCH) return {};
    return fmt::format("cannot stop thread {}: {}", tid, std::strerror(errno));
  }
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(tid, &status, __WALL);
    if (r < 0) {
      if (errno == EINTR) {
        if (g_signal) return "interrupted";
        continue;
      }
      return {}; // ECHILD: the thread is gone
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) return {};
    if (!WIFSTOPPED(status)) continue;
    seized.stopped = true;
    // PTRACE_EVENT_STOP: our interrupt (or a group-stop, which detaching leaves as it is).
    // Otherwise a signal reached the thread first: hand it back when detaching.
    if ((status >> 16) != PTRACE_EVENT_STOP) seized.pending_signal = WSTOPSIG(status);
    return {};
  }
}

Result<TracedProgram> TracedProgram::start(const std::vector<std::string>& argv,
                                           bool same_addresses, bool follow_forks) {
  if (argv.empty()) return Error::plain("no program to run");
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child reports a failed exec through this pipe (closed by a successful exec).
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return Error::plain(fmt::format("pipe: {}", std::strerror(errno)));
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return Error::plain(fmt::format("fork: {}", std::strerror(err)));
  }
  if (pid == 0) {
    ::close(report[0]);
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    if (same_addresses) {
      int persona = ::personality(0xffffffff);
      if (persona != -1) ::personality(static_cast<unsigned long>(persona) | ADDR_NO_RANDOMIZE);
    }
    ::execvp(args[0], args.data());
    int err = errno;
    (void)!::write(report[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(report[1]);
  int exec_errno = 0;
  ssize_t got = ::read(report[0], &exec_errno, sizeof exec_errno);
  ::close(report[0]);
  TracedProgram program(pid);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return Error::plain("waitpid failed");
  if (got == sizeof exec_errno) {
    program.forget();
    return Error::plain(fmt::format("cannot run {}: {}", argv[0], std::strerror(exec_errno)));
  }
  if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) {
    program.forget();
    return Error::plain(fmt::format("{} did not stop after exec (status {:#x})", argv[0], status));
  }
  long options =
      PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD;
  if (follow_forks) options |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
  if (::ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(options)) != 0)
    return Error::plain(fmt::format("PTRACE_SETOPTIONS: {}", std::strerror(errno)));
  return program;
}

TracedProgram::~TracedProgram() {
  kill();
}

void TracedProgram::kill() {
  if (pid_ <= 0) return;
  // The program's descendants die too, traced or not: as a subreaper this process inherits each
  // one whose parent dies, and kills it in turn, until none is left. (A process with a SIGKILL
  // pending forks no more, so the tree only shrinks.)
  int was_subreaper = 0;
  ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::kill(pid_, SIGKILL);
  const pid_t self = ::getpid();
  for (;;) {
    int status;
    pid_t r = ::waitpid(-1, &status, __WALL | WNOHANG);
    if (r > 0 || (r < 0 && errno == EINTR)) continue;
    if (r < 0) break; // ECHILD: all gone
    // Children left, not dead yet: among them the orphans inherited since.
    if (auto pids = proc_numeric_entries("/proc"))
      for (int pid : *pids)
        if (pid != pid_ && proc_parent(pid) == self) ::kill(pid, SIGKILL);
    r = ::waitpid(-1, &status, __WALL);
    if (r < 0 && errno == ECHILD) break;
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
  pid_ = 0;
}

Status TracedProgram::run_to(uint64_t address) {
  errno = 0;
  long word = ::ptrace(PTRACE_PEEKTEXT, pid_, reinterpret_cast<void*>(address), nullptr);
  if (errno != 0)
    return Error::plain(
        fmt::format("cannot read the code at {:#x}: {}", address, std::strerror(errno)));
  long trap = (word & ~0xffL) | 0xcc;
  if (::ptrace(PTRACE_POKETEXT, pid_, reinterpret_cast<void*>(address),
               reinterpret_cast<void*>(trap)) != 0)
    return Error::plain(
        fmt::format("cannot write a breakpoint at {:#x}: {}", address, std::strerror(errno)));
  int deliver = 0;
  for (;;) {
    if (g_signal) return Error::plain("interrupted");
    if (::ptrace(PTRACE_CONT, pid_, nullptr, reinterpret_cast<void*>(static_cast<long>(deliver))) !=
        0)
      return Error::plain(fmt::format("PTRACE_CONT: {}", std::strerror(errno)));
    deliver = 0;
    int status = 0;
    pid_t tid = ::waitpid(-1, &status, __WALL);
    if (tid < 0) {
      if (errno == EINTR) continue;
      return Error::plain("the program ended before reaching the start address");
    }
    if (tid != pid_) { // a thread started by a constructor: let it run
      if (WIFSTOPPED(status)) ::ptrace(PTRACE_CONT, tid, nullptr, nullptr);
      continue;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      pid_ = 0;
      return Error::plain(fmt::format("the program ended before reaching {:#x}", address));
    }
    if (!WIFSTOPPED(status)) continue;
    int sig = WSTOPSIG(status);
    if (sig != SIGTRAP) {
      deliver = sig;
      continue;
    }
    if ((status >> 16) != 0) continue; // clone or exec event
    user_regs_struct regs;
    if (::ptrace(PTRACE_GETREGS, pid_, nullptr, &regs) != 0)
      return Error::plain(fmt::format("PTRACE_GETREGS: {}", std::strerror(errno)));
    if (regs.rip != address + 1) { // a SIGTRAP of the program's own: its to handle
      deliver = SIGTRAP;
      continue;
    }
    regs.rip = address;
    if (::ptrace(PTRACE_POKETEXT, pid_, reinterpret_cast<void*>(address),
                 reinterpret_cast<void*>(word)) != 0 ||
        ::ptrace(PTRACE_SETREGS, pid_, nullptr, &regs) != 0)
      return Error::plain(fmt::format("cannot remove the breakpoint: {}", std::strerror(errno)));
    return Ok{};
  }
}

} // namespace ehelf
