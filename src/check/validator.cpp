// check::run_check: the stepping loop (single steps and straight-line runs to a breakpoint),
// the per-pc cache and the comparison with the rows.
#include "check/validator.hpp"

#include "check/checker.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/kcmp.h>
#include <map>
#include <sched.h>
#include <set>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

#include "check/row_check.hpp"
#include "check/shadow_stack.hpp"
#include "check/straight_line.hpp"
#include "check/trace.hpp"
#include "model/registers.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/proc_files.hpp"
#include "runtime/ptrace_process.hpp"
#include "runtime/symbolize.hpp"
#include "x86/decoder.hpp"
#include "x86/program_main.hpp"

namespace ehelf::check {
namespace {

// Whether a system call (its number in rax) makes a process: clone, fork, vfork, clone3.
bool makes_process(uint64_t number) {
  return number == 56 || number == 57 || number == 58 || number == 435;
}

// Whether a system call (its number in rax) can map memory or change what may be written or run
// where: mmap, mprotect, mremap, pkey_mprotect.
bool changes_mappings(uint64_t number) {
  return number == 9 || number == 10 || number == 25 || number == 329;
}

// Whether processes `a` and `b` share their memory (kcmp KCMP_VM); nullopt when the kernel cannot
// tell (no kcmp).
std::optional<bool> same_memory(pid_t a, pid_t b) {
  const long r = ::syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);
  if (r >= 0) return r == 0;
  if (errno == ESRCH) return false; // gone
  return std::nullopt;
}

// The clone flags of a process-making system call about to run at `regs` (clone: rdi; clone3:
// the first field of the structure rdi points to; vfork: CLONE_VM | CLONE_VFORK; fork: none).
uint64_t clone_flags(const user_regs_struct& regs, ProcessMemory& memory) {
  uint64_t flags = 0;
  switch (regs.rax) {
  case 56:
    return regs.rdi;
  case 58:
    return CLONE_VM | CLONE_VFORK;
  case 435:
    return memory.read(regs.rdi, &flags, 8) ? flags : 0;
  default:
    return 0;
  }
}

// A signal mask of a thread from its /proc status ("SigBlk", "SigCgt", "SigIgn", "SigPnd",
// "ShdPnd"); 0 if it cannot be read.
uint64_t signal_mask(pid_t pid, pid_t tid, std::string_view field) {
  std::string status;
  if (!read_proc_file(fmt::format("/proc/{}/task/{}/status", pid, tid), status)) return 0;
  const size_t at = status.find(fmt::format("\n{}:", field));
  if (at == std::string::npos) return 0;
  return std::strtoull(status.c_str() + at + field.size() + 2, nullptr, 16);
}

constexpr uint64_t signal_bit(int signal) {
  return uint64_t(1) << (signal - 1);
}

// The thread group of a thread, from /proc (0 if it cannot be read).
pid_t thread_group(pid_t tid) {
  std::FILE* f = std::fopen(fmt::format("/proc/{}/status", tid).c_str(), "re");
  if (!f) return 0;
  char line[256];
  pid_t tgid = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "Tgid: %d", &tgid) == 1) break;
  std::fclose(f);
  return tgid;
}

} // namespace

namespace detail {

bool Checker::module_selected(const Module& m) const {
  if (options_.only.empty()) return true;
  std::string_view base = m.path;
  if (size_t slash = base.rfind('/'); slash != std::string_view::npos)
    base.remove_prefix(slash + 1);
  for (const std::string& o : options_.only)
    if (o == m.path || o == base) return true;
  return false;
}

void Checker::refresh_modules(Process& p) {
  auto m = ModuleMap::for_process(p.pid);
  if (!m) return;
  p.pcs.clear(); // PcInfo points into the old map
  p.map = std::move(*m);
  for (Module& mod : p.map->modules()) {
    auto it = loaded_.find({mod.path, mod.bias});
    if (it != loaded_.end()) mod.data = it->second;
  }
}

const PcInfo& Checker::info_for(Process& p, uint64_t pc) {
  if (auto it = p.pcs.find(pc); it != p.pcs.end()) return it->second;
  const Module* m = p.map->find(pc);
  if (!m) { // a library loaded since: read the maps again
    refresh_modules(p);
    m = p.map->find(pc);
  }
  PcInfo info;
  uint8_t code[16];
  size_t n = sizeof code;
  while (n > 0 && !p.memory->read(pc, code, n))
    --n; // the last bytes of a mapping
  unpatched(p, pc, code, n);
  if (auto insn = decoder_.decode(std::span<const uint8_t>(code, n), pc); insn.ok()) {
    info.decoded = true;
    info.insn = *insn;
  }
  if (m) {
    info.module = m;
    const ModuleData& data = p.map->load(*m, policy_, &*p.memory);
    loaded_[{m->path, m->bias}] = m->data;
    info.data = &data;
    info.checked = module_selected(*m);
    if (data.table) info.range = data.table->find(pc - m->bias);
  }
  return p.pcs.emplace(pc, info).first->second;
}

std::string Checker::function(const Site& site) {
  return format_symbol(names_.name(*judging_->map, *site.module, site.pc));
}

std::string Checker::instruction(const Site& site) {
  uint8_t code[16];
  size_t n = sizeof code;
  while (n > 0 && !judging_->memory->read(site.pc, code, n))
    --n;
  unpatched(*judging_, site.pc, code, n);
  return decoder_.format(std::span<const uint8_t>(code, n), site.pc - site.module->bias);
}

// Judges the instruction at the thread's pc (in a checked module, its innermost frame known)
// against its row, and records it with --record.
void Checker::check(pid_t tid, Thread& t, const RegisterState& regs, const PcInfo& info) {
  const ShadowFrame& frame = t.stack.frames().back();
  const Site site{info.module, info.data, info.range, regs.get(x86_64::RIP), tid};
  judging_ = t.process;
  if (!trace_) {
    if (info.data->table) judge_.check(site, regs, frame, *t.process->memory);
    return;
  }
  RecordingMemory memory(*t.process->memory);
  if (info.data->table) judge_.check(site, regs, frame, memory);
  TraceModule m;
  m.path = info.module->path;
  m.bias = info.module->bias;
  if (info.data->elf)
    if (auto id = info.data->elf->build_id()) m.build_id.assign(id->begin(), id->end());
  if (info.module->vdso) m.image = info.data->image;
  trace_->step(tid, trace_->module(m), site.pc - m.bias, regs, frame, memory.reads());
}

void Checker::step(pid_t tid, Thread& t, int signal) {
  if (options_.max_steps && result_.summary.steps >= options_.max_steps) {
    result_.summary.step_limit = true;
    stop_ = true;
    return;
  }
  Process& p = *t.process;
  if (t.stepping && p.breakpoints.count(t.before.rip)) { // it would run the int3
    p.parked.push_back({tid, signal, t.before.rip});
    return;
  }
  if (t.stepping && !t.spawning && t.decoded && t.insn.flow == x86::Flow::syscall &&
      (makes_process(t.before.rax) || changes_mappings(t.before.rax))) {
    if (!p.breakpoints.empty()) {
      p.parked.push_back({tid, signal, 0});
      return;
    }
    t.spawning = true;
    ++p.spawning;
  }
  // A system call is run to its exit stop rather than single-stepped: the kernel reports a step
  // over a system call with a forced SIGTRAP, which resets the program's SIGTRAP handler when it
  // has the signal blocked (glibc's raise does, around its tgkill).
  if (signal != 0 && p.traps_caught && !t.unobserved) {
    // The handler may block SIGTRAP: it runs unobserved (the step into it would be a trap).
    if (signal_mask(p.pid, tid, "SigCgt") & signal_bit(signal)) ++result_.summary.signals;
    t.unobserved = true;
    t.unobserved_rsp = t.before.rsp;
  }
  const bool over_syscall =
      t.unobserved || (t.stepping && t.decoded && t.insn.flow == x86::Flow::syscall && signal == 0);
  if (::ptrace(over_syscall ? PTRACE_SYSCALL : PTRACE_SINGLESTEP, tid, nullptr,
               reinterpret_cast<void*>(long(signal))) != 0) {
    if (errno == ESRCH) return; // killed meanwhile
    error_ = fmt::format("{}: {}", over_syscall ? "PTRACE_SYSCALL" : "PTRACE_SINGLESTEP",
                         std::strerror(errno));
    stop_ = true;
    return;
  }
  t.injected = signal != 0;
  t.running = true;
}

// The kernel's rt_sigframe at the handler's rsp: the restorer, then a ucontext whose
// mcontext holds the interrupted rsp and rip (the stepped instruction's, or the next one's
// when a system call was interrupted).
bool Checker::handler_entered(const Thread& t, const user_regs_struct& after, uint64_t& restorer) {
  const user_regs_struct& before = t.before;
  constexpr uint64_t kMcontext = 8 + 40; // pretcode, uc_flags, uc_link, uc_stack
  uint64_t frame_rsp = 0, frame_rip = 0;
  ProcessMemory& memory = *t.process->memory;
  if (!memory.read(after.rsp, &restorer, 8) ||
      !memory.read(after.rsp + kMcontext + 15 * 8, &frame_rsp, 8) ||
      !memory.read(after.rsp + kMcontext + 16 * 8, &frame_rip, 8))
    return false;
  return frame_rsp == before.rsp &&
         (frame_rip == before.rip || (t.decoded && frame_rip == before.rip + t.insn.length));
}

// The thread stopped after a step: account for the instruction, check the next, step again.
void Checker::after_step(pid_t tid, Thread& t) {
  user_regs_struct now;
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &now) != 0) {
    if (t.spawning) {
      t.spawning = false;
      --t.process->spawning;
    }
    return;
  }
  if (t.spawning) spawned(t, now); // the system call returned
  if (t.stepping && !t.injected && now.rip == t.before.rip && now.rsp == t.before.rsp) {
    // One more iteration of a rep-prefixed instruction (a step stops after each): still the
    // same instruction, checked once, as a run to a breakpoint sees it.
    step(tid, t, 0);
    return;
  }
  account(t, now);
  if (t.unobserved) {
    step(tid, t, 0); // on to the next system call
    return;
  }
  at_instruction(tid, t, now);
}

// A system call the thread ran with PTRACE_SYSCALL returned: a step, unless the thread runs
// unobserved. Whether the program handles SIGTRAP, and whether the thread blocks it, can change
// with it.
void Checker::syscall_returned(pid_t tid, Thread& t) {
  Process& p = *t.process;
  user_regs_struct now;
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &now) != 0) return;
  if (now.orig_rax == 13) // rt_sigaction
    p.traps_caught = ((signal_mask(p.pid, tid, "SigCgt") | signal_mask(p.pid, tid, "SigIgn")) &
                      signal_bit(SIGTRAP)) != 0;
  const bool blocked =
      p.traps_caught && (signal_mask(p.pid, tid, "SigBlk") & signal_bit(SIGTRAP)) != 0;
  if (!t.unobserved) {
    if (blocked) {
      t.unobserved = true;
      t.unobserved_rsp = now.rsp;
    }
    after_step(tid, t);
    return;
  }
  if (blocked) {
    if (t.spawning) spawned(t, now);
    step(tid, t, 0);
    return;
  }
  // Observed again. Back where it began (a handler returned, raise unblocked SIGTRAP), its
  // frames are the ones it had; elsewhere they are unknown until the next call.
  if (t.spawning) spawned(t, now);
  t.unobserved = false;
  if (now.rsp != t.unobserved_rsp) result_.summary.resyncs += t.stack.lost_track();
  t.stepping = false;
  at_instruction(tid, t, now);
}

// The stepped instruction ran, from t.before to `now`: the thread's frames follow.
void Checker::account(Thread& t, const user_regs_struct& now) {
  if (t.stepping) {
    RegisterState before = to_register_state(t.before), after = to_register_state(now);
    uint64_t restorer = 0;
    if (t.injected && handler_entered(t, now, restorer)) {
      ++result_.summary.signals;
      t.stack.signal_entered(before, after, restorer);
    } else {
      size_t frames = t.stack.frames().size();
      unsigned resynced =
          t.decoded ? t.stack.executed(t.insn, before, after) : t.stack.executed_unknown(after);
      if (t.stack.frames().size() > frames) ++result_.summary.calls;
      result_.summary.resyncs += resynced;
    }
  }
}

// The thread's system call that makes a process or changes mappings returned to it at `now`. The
// writable code is read again after the latter. A child (rax) that shares the process's memory
// without being one of its threads runs in it from now on, alongside: the process sets no
// breakpoint while it does (memory_shared()).
void Checker::spawned(Thread& t, const user_regs_struct& now) {
  t.spawning = false;
  Process& p = *t.process;
  --p.spawning;
  if (changes_mappings(t.before.rax)) {
    p.mappings_changed = true;
    return;
  }
  const auto child = pid_t(now.rax);
  if (int64_t(now.rax) <= 0 || thread_group(child) == p.pid) return;
  const uint64_t flags = clone_flags(t.before, *p.memory);
  // A vfork child has left the memory by the time its parent returns.
  if (same_memory(p.pid, child).value_or((flags & CLONE_VM) && !(flags & CLONE_VFORK)))
    p.memory_sharers.push_back(child);
}

// Whether another process runs in `p`'s memory: a vfork child's parent's, or a child of `p`
// sharing it (those that exited or called exec since are forgotten).
bool Checker::memory_shared(Process& p) {
  std::erase_if(p.memory_sharers, [&](pid_t child) {
    std::optional<bool> same = same_memory(p.pid, child);
    if (same) return !*same;
    const char state = proc_state(child);
    return state == 0 || state == 'Z' || state == 'X';
  });
  return p.shares_memory || !p.memory_sharers.empty();
}

// Whether the program may write the code at `address` (Process::writable_code).
bool Checker::code_writable(Process& p, uint64_t address) {
  if (p.mappings_changed) {
    p.writable_code.clear();
    if (auto maps = read_proc_maps(p.pid, /*executable_only=*/true))
      for (const ProcMapping& m : *maps)
        if (m.writable) p.writable_code.emplace_back(m.start, m.end);
    p.mappings_changed = false;
  }
  return std::any_of(p.writable_code.begin(), p.writable_code.end(), [&](const auto& range) {
    return range.first <= address && address < range.second;
  });
}

// Whether a SIGTRAP is the end of our single step (the kernel's trace trap, or its report of a
// stepped system call), not one of the program's: its int3 (SI_KERNEL: a stepped thread never
// runs one of our breakpoints), raise or kill.
bool Checker::our_trap(pid_t tid) const {
  siginfo_t info{};
  if (::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &info) != 0) return true;
  return info.si_code == TRAP_TRACE || info.si_code == TRAP_BRKPT;
}

// A signal for the program stopped the thread: delivered as the kernel would have.
void Checker::program_signal(pid_t tid, Thread& t, int signal) {
  siginfo_t info{};
  if (::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &info) != 0 && errno == EINVAL) {
    // No signal's delivery: the group-stop that a stop signal delivered before began. The
    // program stays stopped, as it would natively, until it gets a SIGCONT.
    if (!t.group_stopped) ++group_stopped_;
    t.group_stopped = true;
    return;
  }
  user_regs_struct now;
  if (t.stepping && !t.unobserved && ::ptrace(PTRACE_GETREGS, tid, nullptr, &now) == 0 &&
      (now.rip != t.before.rip || now.rsp != t.before.rsp)) {
    // The stepped instruction ran and raised it (int3, a kill or raise system call): the
    // signal comes before the next instruction.
    if (t.spawning) spawned(t, now);
    account(t, now);
    step_from(tid, t, now, signal);
    return;
  }
  // The stepped instruction did not run: the signal comes first, with the step, which stops at
  // the handler's first instruction if it has one.
  step(tid, t, signal);
}

// Resumes the group-stopped threads whose process got a SIGCONT (pending for it or for them):
// the kernel would have woken them.
void Checker::resume_continued() {
  for (auto& [tid, t] : threads_) {
    if (!t.group_stopped) continue;
    const uint64_t pending =
        signal_mask(t.process->pid, tid, "SigPnd") | signal_mask(t.process->pid, tid, "ShdPnd");
    if (!(pending & signal_bit(SIGCONT))) continue;
    t.group_stopped = false;
    --group_stopped_;
    step(tid, t, 0);
  }
}

// The thread is stopped before the instruction at now.rip: check it, then run on.
void Checker::at_instruction(pid_t tid, Thread& t, const user_regs_struct& now) {
  if (!options_.single_step && plan_block(tid, t, now)) return;
  step_from(tid, t, now, 0);
}

// Checks the instruction at now.rip and single-steps it (delivering `signal`, if not 0).
void Checker::step_from(pid_t tid, Thread& t, const user_regs_struct& now, int signal) {
  ++result_.summary.steps;
  if (code_writable(*t.process, now.rip)) t.process->pcs.erase(now.rip); // it may have changed
  const PcInfo& info = info_for(*t.process, now.rip);
  if (t.stack.mode() == Mode::altstack) ++result_.summary.unchecked_signal_steps;
  if (t.stack.checkable() && info.checked && info.data) check(tid, t, to_register_state(now), info);
  t.before = now;
  t.decoded = info.decoded;
  t.insn = info.insn;
  t.stepping = true;
  step(tid, t, signal);
}

Checker::Process& Checker::add_process(pid_t pid) {
  auto& p = processes_[pid];
  p = std::make_unique<Process>();
  p->pid = pid;
  p->memory.emplace(pid);
  p->mem = ::open(fmt::format("/proc/{}/mem", pid).c_str(), O_RDWR | O_CLOEXEC);
  refresh_modules(*p);
  return *p;
}

Checker::Thread& Checker::add_thread(pid_t tid, Process& process) {
  auto [it, added] = threads_.try_emplace(tid);
  if (added) {
    it->second.process = &process;
    ++process.threads;
    ++result_.summary.threads;
  }
  return it->second;
}

void Checker::forget_thread(pid_t tid) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  Process* p = it->second.process;
  const Thread t = std::move(it->second);
  threads_.erase(it);
  std::erase_if(p->parked, [&](const Process::Parked& w) { return w.tid == tid; });
  if (t.spawning) --p->spawning;
  if (t.group_stopped) --group_stopped_;
  if (t.block.active) unplant(*p, t.block.end_pc);
  if (--p->threads == 0) processes_.erase(p->pid);
}

// The thread was in clone, fork or vfork, and `child` is new: a thread of its process, or (with
// --follow-fork) a process of its own whose frames are, at first, a copy of the parent thread's:
// it returns from the same system call into the same functions.
void Checker::new_child(Thread& parent, int event, pid_t child) {
  if (threads_.count(child)) return; // its first stop came first, as a thread of a known process
  if (event == PTRACE_EVENT_CLONE && thread_group(child) == parent.process->pid) {
    add_thread(child, *parent.process);
    return;
  }
  Process& p = add_process(child);
  // vfork, a clone that is no thread, or a fork-like clone(CLONE_VM) (reported as a fork)
  p.shares_memory =
      event != PTRACE_EVENT_FORK ||
      same_memory(parent.process->pid, child)
          .value_or((clone_flags(parent.before, *parent.process->memory) & CLONE_VM) != 0);
  ++result_.summary.processes;
  Thread& t = add_thread(child, p);
  t.stack = parent.stack;
  t.stepping = parent.stepping;
  t.before = parent.before;
  t.decoded = parent.decoded;
  t.insn = parent.insn;
  if (early_children_.erase(child)) { // stopped already: its first instruction comes next
    t.fresh = false;
    after_step(child, t);
  }
}

// A new program in the thread's process: its tables are another story. The process runs on
// unchecked.
void Checker::exec_called(Thread& t) {
  const Process* p = t.process; // gone with its last thread, below
  const bool program = p->pid == pid_;
  ++result_.summary.execs;
  if (program) result_.summary.exec_detached = true;
  std::vector<pid_t> gone;
  for (auto& [other, state] : threads_)
    if (state.process == p) gone.push_back(other);
  for (pid_t other : gone) {
    ::ptrace(PTRACE_DETACH, other, nullptr, nullptr);
    forget_thread(other);
  }
  if (program) program_->forget(); // no longer ours to kill
}

Status Checker::start() {
  auto program = TracedProgram::start(options_.argv, !options_.randomize, options_.follow_fork);
  if (!program) return std::move(program).error();
  program_.emplace(std::move(*program));
  pid_ = program_->pid();
  policy_.compiled = false;
  policy_.compact = false;
  policy_.whole_table = true;
  Process& p = add_process(pid_);
  if (!p.map) return Error::plain(fmt::format("cannot read the modules of process {}", pid_));
  Thread& t = add_thread(pid_, p);
  t.fresh = false;
  if (options_.start == CheckOptions::Start::entry) return Ok{};
  // The executable: the module whose file is /proc/PID/exe.
  char exe[4096];
  ssize_t len = ::readlink(fmt::format("/proc/{}/exe", pid_).c_str(), exe, sizeof exe - 1);
  if (len <= 0) return Error::plain("cannot read the program's /proc/PID/exe");
  exe[len] = 0;
  const std::string symbol =
      options_.start == CheckOptions::Start::main ? std::string("main") : options_.from_symbol;
  for (const Module& m : p.map->modules()) {
    if (m.path != exe) continue;
    const ModuleData& data = p.map->load(m, policy_, &*p.memory);
    if (!data.elf) break;
    std::optional<uint64_t> start;
    for (const Symbol& s : data.elf->symbols())
      if (s.name == symbol) {
        start = s.value;
        break;
      }
    // A stripped program (most of a distribution's) has no symbol for main: _start names it.
    if (!start && options_.start == CheckOptions::Start::main)
      start = x86::main_from_entry(*data.elf);
    if (!start)
      return Error::plain(fmt::format("{}: no symbol {}{} (try --from-entry)", exe, symbol,
                                      options_.start == CheckOptions::Start::main
                                          ? ", and the entry point's call to __libc_start_main "
                                            "was not found"
                                          : ""));
    if (Status st = program_->run_to(*start + m.bias); !st.ok()) return st;
    user_regs_struct regs;
    if (::ptrace(PTRACE_GETREGS, pid_, nullptr, &regs) != 0)
      return Error::plain(fmt::format("PTRACE_GETREGS: {}", std::strerror(errno)));
    uint64_t ret = 0;
    p.memory->read(regs.rsp, &ret, 8);
    t.stack.push_call(to_register_state(regs), ret);
    return Ok{};
  }
  return Error::plain(fmt::format("{}: the program's module was not found in its maps", exe));
}

Result<CheckResult> Checker::run() {
  TerminationGuard guard;
  auto t0 = std::chrono::steady_clock::now();
  if (!options_.record.empty()) {
    auto writer = TraceWriter::create(options_.record);
    if (!writer) return std::move(writer).error();
    trace_ = std::move(*writer);
  }
  if (Status st = start(); !st.ok()) {
    if (!TerminationGuard::received()) return std::move(st).error();
    stop_ = true; // interrupted before the start: the partial summary says so
  } else {
    after_step(pid_, threads_.at(pid_)); // checks the first instruction and steps it
  }
  while (!stop_) {
    // Read at every stop, not only when waitpid is interrupted: a busy program stops again
    // before the signal can find the checker inside waitpid.
    if (TerminationGuard::received()) break;
    int status = 0;
    pid_t tid = ::waitpid(-1, &status, __WALL | (group_stopped_ ? WNOHANG : 0));
    if (tid == 0) { // nothing new while the program is stopped: a SIGCONT may have come
      resume_continued();
      if (group_stopped_) ::usleep(10000);
      continue;
    }
    if (tid < 0) {
      if (errno == EINTR) continue;
      break; // ECHILD: every thread is gone
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (tid == pid_) {
        result_.summary.exit_status = status;
        program_->forget();
      }
      forget_thread(tid);
      early_children_.erase(tid);
      continue;
    }
    if (!WIFSTOPPED(status)) continue;
    auto known = threads_.find(tid);
    if (known == threads_.end()) {
      // A new thread's or child's first stop before its parent's event: a thread of a process
      // followed now joins it; a new process waits for the event.
      auto p = processes_.find(thread_group(tid));
      if (p == processes_.end() || p->first == tid) {
        early_children_.insert(tid);
        continue;
      }
      add_thread(tid, *p->second);
      known = threads_.find(tid);
    }
    Thread& t = known->second;
    t.running = false;
    const int sig = WSTOPSIG(status), event = status >> 16;
    if (event == PTRACE_EVENT_EXEC) {
      exec_called(t);
      continue;
    }
    if (event != 0) { // clone, fork, vfork (the child reports its own stop) or another event
      unsigned long child = 0;
      if ((event == PTRACE_EVENT_CLONE || event == PTRACE_EVENT_FORK ||
           event == PTRACE_EVENT_VFORK) &&
          ::ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &child) == 0)
        new_child(t, event, pid_t(child)); // known now: no run to a breakpoint meanwhile
      step(tid, t, 0);
      t.injected = false;
      continue;
    }
    if (sig == (SIGTRAP | 0x80)) { // a system call stepped with PTRACE_SYSCALL
      t.syscall_entered = !t.syscall_entered;
      if (t.syscall_entered) {
        step(tid, t, 0); // on to its exit
        t.injected = false;
      } else {
        syscall_returned(tid, t);
      }
      continue;
    }
    if (t.block.active) {
      block_stopped(tid, t, sig);
      continue;
    }
    if (t.fresh) { // a new thread's first stop (SIGSTOP): its first instruction comes next
      t.fresh = false;
      if (sig == SIGSTOP) {
        after_step(tid, t);
        continue;
      }
    }
    if (sig == SIGTRAP && our_trap(tid)) {
      after_step(tid, t);
      continue;
    }
    program_signal(tid, t, sig);
  }
  result_.summary.interrupted = TerminationGuard::received();
  // Followed children die with the program when the check stops early.
  for (const auto& [pid, process] : processes_)
    if (pid != pid_) ::kill(pid, SIGKILL);
  for (pid_t child : early_children_)
    ::kill(child, SIGKILL);
  if (program_ && program_->pid()) program_->kill(); // and the children it forked, followed or not
  if (!error_.empty()) return Error::plain(error_);
  auto& s = result_.summary;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (trace_)
    if (Status st = trace_->finish(s); !st.ok()) return std::move(st).error();
  return judge_.finish();
}

} // namespace detail

Result<CheckResult> run_check(const CheckOptions& options) {
  detail::Checker checker(options);
  return checker.run();
}

} // namespace ehelf::check
