// The runtime's one ptrace module: stopping and releasing the threads of a running process
// (`ehelf stack`), a stopped thread's registers in the model's numbering (`ehelf stack`, the
// `_UPT_*` accessors), and running a program under ptrace from its first instruction (`ehelf
// check`).
#pragma once

#include <csignal>
#include <cstddef>
#include <set>
#include <string>
#include <sys/types.h>
#include <sys/user.h>
#include <vector>

#include "model/register_state.hpp"
#include "support/result.hpp"

namespace ehelf {

// The offset in `struct user` (PTRACE_PEEKUSER) of DWARF register `reg` (0-16: rax rdx rcx rbx
// rsi rdi rbp rsp r8-r15 rip). Requires reg < x86_64::kGeneralRegs.
size_t user_register_offset(unsigned reg);
// A stopped thread's registers (PTRACE_GETREGS) as the model's register state, all 17 known.
RegisterState to_register_state(const user_regs_struct& u);
// True for a thread running 32-bit code (the i386 compat code segment, 0x23): its registers and
// stack are not x86_64's, and ehelf does not unwind it.
inline bool is_32bit_thread(const user_regs_struct& u) {
  return u.cs == 0x23;
}

// While it lives, SIGINT, SIGTERM and SIGHUP only set a flag (installed without SA_RESTART, so a
// blocked waitpid returns): a tracer then releases its tracees before dying. On destruction the
// previous handlers come back and, if one of the signals came, the process dies of it.
class TerminationGuard {
public:
  TerminationGuard();
  ~TerminationGuard();
  TerminationGuard(const TerminationGuard&) = delete;
  TerminationGuard& operator=(const TerminationGuard&) = delete;
  // The signal received since construction (0: none).
  static int received();

private:
  struct sigaction old_[3]{};
};

// The threads of a running process, seized with PTRACE_SEIZE and stopped with PTRACE_INTERRUPT
// (which sends no SIGSTOP: if the tracer dies, the kernel detaches and the threads run on).
// Detaches them on destruction, whatever happened.
class ProcessAttachment {
public:
  struct Thread {
    pid_t tid = 0;
    bool stopped = false;   // in a ptrace-stop: registers readable, must be detached
    int pending_signal = 0; // caught in signal-delivery-stop: re-injected on detach
  };

  explicit ProcessAttachment(pid_t pid) : pid_(pid) {}
  ProcessAttachment(const ProcessAttachment&) = delete;
  ProcessAttachment& operator=(const ProcessAttachment&) = delete;
  ~ProcessAttachment() { detach_all(); }

  // Seizes and stops every thread in /proc/PID/task, re-reading the list until no new thread
  // shows up (threads started meanwhile). Returns an error message, or "" on success. Gives up
  // with "interrupted" when a TerminationGuard has seen a signal.
  std::string attach_all();
  std::vector<Thread>& threads() { return threads_; } // in /proc/PID/task order
  void detach_all();
  // Threads that exited or were exiting while being attached (skipped; never stopped).
  size_t skipped() const { return skipped_; }

private:
  std::string attach(pid_t tid);
  // True if the thread is gone or a zombie (exiting): attaching it fails with EPERM.
  bool thread_gone(pid_t tid) const;

  pid_t pid_;
  std::vector<Thread> threads_;
  std::set<pid_t> seen_;
  size_t skipped_ = 0;
};

// A program started under ptrace: fork, PTRACE_TRACEME, exec. start() returns once it is stopped
// at its first instruction (the dynamic loader's entry, or the program's for a static one), with
// PTRACE_O_TRACECLONE (its threads are traced too), PTRACE_O_TRACEEXEC, PTRACE_O_EXITKILL (it
// dies with the tracer) and PTRACE_O_TRACESYSGOOD (system call stops say SIGTRAP | 0x80) set, and
// with `follow_forks` PTRACE_O_TRACEFORK and PTRACE_O_TRACEVFORK (its children are traced too).
// The destructor kills it and every process descended from it.
class TracedProgram {
public:
  // `same_addresses`: without address-space randomisation (personality ADDR_NO_RANDOMIZE, as
  // gdb runs programs), so that runs repeat exactly.
  static Result<TracedProgram> start(const std::vector<std::string>& argv,
                                     bool same_addresses = false, bool follow_forks = false);
  TracedProgram(TracedProgram&& o) noexcept : pid_(o.pid_) { o.pid_ = 0; }
  TracedProgram& operator=(TracedProgram&&) = delete;
  ~TracedProgram();

  pid_t pid() const { return pid_; }
  // Kills the program and its descendants, traced or not (this process is their subreaper
  // meanwhile), and reaps them all.
  void kill();
  // The program exited (reaped by the caller's waitpid): nothing to kill any more.
  void forget() { pid_ = 0; }

  // Stops at `address` (an int3 written there, the original byte put back after the hit, the pc
  // moved back onto it), letting the program run until then; other signals are delivered. Only
  // before any thread but the first exists. False (and an error) if the program ended first.
  Status run_to(uint64_t address);

private:
  explicit TracedProgram(pid_t pid) : pid_(pid) {}
  pid_t pid_ = 0;
};

} // namespace ehelf
