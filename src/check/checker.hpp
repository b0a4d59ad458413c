// The checker of `ehelf check` (check::run_check): one traced program, its processes and
// threads, stepped one instruction at a time or run straight to a breakpoint, each instruction's
// effect on the stack compared with the rows. Internal to src/check: validator.cpp has the
// stepping loop and the processes' lives, straight_runs.cpp the breakpoints and straight-line
// runs.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <sys/types.h>
#include <sys/user.h>
#include <unordered_map>
#include <utility>
#include <vector>

#include "check/row_check.hpp"
#include "check/shadow_stack.hpp"
#include "check/straight_line.hpp"
#include "check/trace.hpp"
#include "check/validator.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/ptrace_process.hpp"
#include "runtime/symbolize.hpp"
#include "x86/decoder.hpp"

namespace ehelf::check::detail {

// What the checker knows of one pc, found once.
struct PcInfo {
  bool decoded = false;
  x86::Instruction insn;
  const Module* module = nullptr;
  const ModuleData* data = nullptr;
  const TableRange* range = nullptr; // null: no row covers the pc
  bool checked = false;              // the module is among those to check
};

class Checker final : SiteNames {
public:
  explicit Checker(const CheckOptions& options) : options_(options), judge_(*this) {}
  Result<CheckResult> run();

private:
  // One traced process (the program, or a child followed with --follow-fork): its modules, its
  // memory and what is known of each pc in it.
  struct Process {
    pid_t pid = 0;
    std::optional<ModuleMap> map;
    std::optional<ProcessMemory> memory;
    std::unordered_map<uint64_t, PcInfo> pcs;
    size_t threads = 0;         // its threads followed now
    bool shares_memory = false; // a vfork child, in its parent's memory: no breakpoints
    // Its children that are no threads of it but share its memory (clone(CLONE_VM) without
    // CLONE_VFORK: they run while it runs): while one does, no breakpoints either.
    std::vector<pid_t> memory_sharers;
    // The breakpoints at the ends of its threads' straight-line runs: the byte each replaced,
    // and how many runs end there. Written through /proc/PID/mem (byte by byte, whether the
    // threads are stopped or not).
    struct Breakpoint {
      uint8_t original = 0;
      unsigned users = 0;
    };
    std::map<uint64_t, Breakpoint> breakpoints;
    int mem = -1; // /proc/PID/mem, read-write
    ~Process() {
      if (mem >= 0) ::close(mem);
    }
    // Threads in flight over a system call that makes a process (clone, fork, vfork, clone3) or
    // changes mappings: while one is, no breakpoint is set (a child would inherit it, or run it
    // in shared memory; code made writable could be written over it by another thread).
    unsigned spawning = 0;
    // The executable mappings the program may write (pages made writable and executable, JIT
    // buffers): code there can change under a breakpoint or after it was decoded, so no
    // straight-line run goes through or ends there, and each step decodes it again. Read again
    // after each system call that changes mappings.
    std::vector<std::pair<uint64_t, uint64_t>> writable_code;
    bool mappings_changed = true;
    // The program handles (or ignores) SIGTRAP: a trap the kernel raises for a step or a
    // breakpoint while one of its threads blocks SIGTRAP would reset that disposition (the
    // kernel forces such traps through), so such a thread runs unobserved (Thread::unobserved).
    bool traps_caught = false;
    // Stopped threads waiting to be stepped: over an instruction where a breakpoint is (until it
    // goes), or over a system call that makes a process or changes mappings (until no breakpoint
    // is left: at 0).
    struct Parked {
      pid_t tid;
      int signal;
      uint64_t breakpoint;
    };
    std::vector<Parked> parked;
  };
  struct Thread {
    Process* process = nullptr;
    ShadowStack stack;
    bool fresh = true;     // not stopped yet (a new thread's first stop is a SIGSTOP)
    bool stepping = false; // `before` is the instruction being stepped
    bool injected = false; // the step delivers a signal
    bool running = false;  // resumed, not stopped since
    bool spawning = false; // counted in its process's `spawning`
    // In the stop its program asked for (SIGSTOP, SIGTSTP...): left stopped until a SIGCONT.
    bool group_stopped = false;
    // Stepping a system call, stopped at its entry (PTRACE_SYSCALL): its exit ends the step.
    bool syscall_entered = false;
    // Blocking SIGTRAP in a program that handles it (in the handler, in raise): it runs from
    // system call to system call, unchecked, until one leaves SIGTRAP unblocked; `unobserved_rsp`
    // is where the stack was when it began.
    bool unobserved = false;
    uint64_t unobserved_rsp = 0;
    user_regs_struct before{};
    bool decoded = false;  // the stepped instruction (a copy: the pc cache is cleared when
    x86::Instruction insn; // libraries come and go)
    Block block;           // the straight-line run in progress, if active
  };

  Status start();
  Process& add_process(pid_t pid);
  Thread& add_thread(pid_t tid, Process& process);
  void forget_thread(pid_t tid);
  void new_child(Thread& parent, int event, pid_t child);
  void exec_called(Thread& t);
  const PcInfo& info_for(Process& p, uint64_t pc);
  void refresh_modules(Process& p);
  void check(pid_t tid, Thread& t, const RegisterState& regs, const PcInfo& info);
  void at_instruction(pid_t tid, Thread& t, const user_regs_struct& now);
  void step_from(pid_t tid, Thread& t, const user_regs_struct& now, int signal);
  bool checks_statically(const PcInfo& info, const RegisterState& regs) const;
  bool plan_block(pid_t tid, Thread& t, const user_regs_struct& now);
  void commit_block(pid_t tid, Thread& t, size_t count);
  void block_stopped(pid_t tid, Thread& t, int sig);
  std::string function(const Site& site) override;
  std::string instruction(const Site& site) override;
  void step(pid_t tid, Thread& t, int signal);
  void after_step(pid_t tid, Thread& t);
  void account(Thread& t, const user_regs_struct& now);
  void spawned(Thread& t, const user_regs_struct& now);
  bool memory_shared(Process& p);
  static bool code_writable(Process& p, uint64_t address);
  bool our_trap(pid_t tid) const;
  void program_signal(pid_t tid, Thread& t, int signal);
  void resume_continued();
  void syscall_returned(pid_t tid, Thread& t);
  bool handler_entered(const Thread& t, const user_regs_struct& after, uint64_t& restorer);
  static void unpatched(const Process& p, uint64_t address, uint8_t* code, size_t n);
  bool plant(Process& p, uint64_t address);
  void unplant(Process& p, uint64_t address);
  bool conflicts(const Process& p, pid_t tid, uint64_t address) const;
  void unpark(Process& p, uint64_t breakpoint);
  bool module_selected(const Module& m) const;

  const CheckOptions& options_;
  std::optional<TracedProgram> program_;
  pid_t pid_ = 0;
  std::unordered_map<pid_t, std::unique_ptr<Process>> processes_;
  // Followed children whose first stop came before their parent's fork event: held stopped
  // until the event says which thread they are a copy of.
  std::set<pid_t> early_children_;
  Process* judging_ = nullptr; // the process of the instruction being checked (for SiteNames)
  x86::Decoder decoder_;
  Symbolizer names_;
  LoadPolicy policy_;
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<const ModuleData>> loaded_;
  std::unordered_map<pid_t, Thread> threads_;
  RowCheck judge_;
  CheckResult& result_ = judge_.result();
  std::unique_ptr<TraceWriter> trace_; // --record
  bool stop_ = false;
  size_t group_stopped_ = 0; // threads with group_stopped set
  std::string error_;
};

} // namespace ehelf::check::detail
