// The checker's breakpoints and straight-line runs: a thread runs from one instruction to a
// breakpoint planted where its run ends, when every instruction on the way can be judged from
// the registers alone (checks_statically), instead of one ptrace step per instruction.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <sys/ptrace.h>
#include <unistd.h>

#include "check/checker.hpp"
#include "model/registers.hpp"

namespace ehelf::check::detail {

// The code bytes [address, address + n) as the program has them, without our breakpoints.
void Checker::unpatched(const Process& p, uint64_t address, uint8_t* code, size_t n) {
  for (auto it = p.breakpoints.lower_bound(address);
       it != p.breakpoints.end() && it->first - address < n; ++it)
    code[it->first - address] = it->second.original;
}

bool Checker::plant(Process& p, uint64_t address) {
  auto [it, added] = p.breakpoints.try_emplace(address);
  if (added) {
    const uint8_t trap = 0xcc;
    if (::pread(p.mem, &it->second.original, 1, off_t(address)) != 1 ||
        ::pwrite(p.mem, &trap, 1, off_t(address)) != 1) {
      p.breakpoints.erase(it);
      return false;
    }
  }
  ++it->second.users;
  return true;
}

void Checker::unplant(Process& p, uint64_t address) {
  auto it = p.breakpoints.find(address);
  if (it == p.breakpoints.end() || --it->second.users > 0) return;
  // A program that wrote over the breakpoint keeps what it wrote.
  uint8_t current = 0;
  if (::pread(p.mem, &current, 1, off_t(address)) == 1 && current == 0xcc)
    (void)!::pwrite(p.mem, &it->second.original, 1, off_t(address));
  p.breakpoints.erase(it);
  unpark(p, address);
  if (p.breakpoints.empty()) unpark(p, 0);
}

// Steps the threads parked for `breakpoint` (0: for a process-making system call).
void Checker::unpark(Process& p, uint64_t breakpoint) {
  std::vector<Process::Parked> waiting;
  std::erase_if(p.parked, [&](const Process::Parked& w) {
    if (w.breakpoint != breakpoint) return false;
    waiting.push_back(w);
    return true;
  });
  for (const Process::Parked& w : waiting)
    if (auto it = threads_.find(w.tid); it != threads_.end()) step(w.tid, it->second, w.signal);
}

// Whether a breakpoint at `address` could be run by another thread of the process than `tid`:
// one in flight over the instruction there, or running a straight-line run through it (ending
// there is fine: the breakpoint is shared).
bool Checker::conflicts(const Process& p, pid_t tid, uint64_t address) const {
  for (const auto& [other, u] : threads_) {
    if (other == tid || u.process != &p || !u.running) continue;
    if (u.block.active) {
      for (const Block::Step& st : u.block.steps)
        if (st.before.get(x86_64::RIP) == address) return true;
    } else if (u.before.rip == address) {
      return true;
    }
  }
  return false;
}

// Whether check() can judge the instruction from `regs` alone (no memory, no unknown register).
bool Checker::checks_statically(const PcInfo& info, const RegisterState& regs) const {
  if (!info.checked || !info.data || !info.data->table || !info.range) return true;
  RowView row = info.data->table->row(info.range->row);
  const RegisterRule* ra = row.rule_for(x86_64::RIP);
  if (describes_jump_target(ra)) return true;
  if (row.cfa.kind != CfaRule::Kind::RegOffset || !regs.has(row.cfa.reg)) return false;
  if (ra && ra->kind != RegisterRule::Kind::Undefined &&
      !(ra->kind == RegisterRule::Kind::Offset && ra->offset == -8))
    return false;
  for (uint16_t reg : kCalleeSaved) {
    const RegisterRule* rule = row.rule_for(reg);
    if (!rule || rule->kind == RegisterRule::Kind::SameValue) {
      if (!regs.has(reg)) return false;
    } else if (rule->kind != RegisterRule::Kind::Offset &&
               rule->kind != RegisterRule::Kind::Undefined) {
      return false;
    }
  }
  return true;
}

// Past the single-step loop: from here to the next branch, system call or instruction the x86
// layer cannot follow, the registers each instruction needs are known from the current ones, so
// the run goes on to a breakpoint there and its instructions are checked as if stepped. Not in a
// vfork child (a breakpoint would be in its parent's memory too), nor while a thread makes a
// process; with several threads, a run ends where another's does (the breakpoint is shared) or
// before, and never where another thread could run into it (conflicts()).
bool Checker::plan_block(pid_t tid, Thread& t, const user_regs_struct& now) {
  Process& p = *t.process;
  if (memory_shared(p) || p.spawning || t.stack.mode() == Mode::altstack ||
      std::any_of(threads_.begin(), threads_.end(),
                  [&](const auto& u) { return u.second.process == &p && u.second.unobserved; }) ||
      p.breakpoints.count(now.rip) || code_writable(p, now.rip) ||
      std::any_of(p.parked.begin(), p.parked.end(),
                  [](const Process::Parked& w) { return w.breakpoint == 0; }))
    return false;
  uint64_t budget = kMaxBlock;
  if (options_.max_steps)
    // Leave the last step of the budget to the instruction at the breakpoint.
    budget = std::min<uint64_t>(
        budget, options_.max_steps - std::min(options_.max_steps, result_.summary.steps + 1));
  Block& b = t.block;
  b.steps.clear();
  RegisterState regs = to_register_state(now);
  while (b.steps.size() < budget) {
    const uint64_t pc = regs.get(x86_64::RIP);
    if (!p.map->find(pc)) break; // info_for would read the maps again
    const PcInfo& info = info_for(p, pc);
    if (!info.decoded) break;
    // On through direct calls and jumps (where they go is in the instruction; a call's frame
    // takes the callee-saved registers' values at entry, so those must be known).
    const x86::Flow flow = info.insn.flow;
    bool known_callee_saved = true;
    for (uint16_t r : kCalleeSaved)
      known_callee_saved &= regs.has(r);
    if (flow != x86::Flow::next && flow != x86::Flow::jump &&
        !(flow == x86::Flow::call && known_callee_saved))
      break;
    if (!checks_statically(info, regs)) break;
    RegisterState after;
    if (!simulate(info.insn, regs, after)) break;
    if (flow == x86::Flow::jump || flow == x86::Flow::call)
      after.set(x86_64::RIP, info.insn.target);
    if (flow == x86::Flow::call) after.set(x86_64::RSP, after.get(x86_64::RSP) - 8);
    // Each address at most once, and never the breakpoint's: the run is one straight path. Not
    // into code the program may write (the run ends before it).
    const uint64_t next = after.get(x86_64::RIP);
    if (next == pc || code_writable(p, next) ||
        std::any_of(b.steps.begin(), b.steps.end(),
                    [&](const Block::Step& st) { return st.before.get(x86_64::RIP) == next; }))
      break;
    b.steps.push_back({regs, info.insn});
    regs = after;
    if (p.breakpoints.count(next)) break; // another run's end: this one ends there too
  }
  if (b.steps.size() < 2) return false;
  b.end = regs;
  b.end_pc = regs.get(x86_64::RIP);
  if (conflicts(p, tid, b.end_pc) || !plant(p, b.end_pc)) return false;
  if (::ptrace(PTRACE_CONT, tid, nullptr, nullptr) != 0) {
    unplant(p, b.end_pc);
    return false;
  }
  b.active = true;
  t.stepping = false;
  t.running = true;
  ++result_.summary.blocks;
  if (p.threads > 1) ++result_.summary.blocks_among_threads;
  return true;
}

// The first `count` instructions of the thread's block ran: check and account for each, as the
// single-step loop would have.
void Checker::commit_block(pid_t tid, Thread& t, size_t count) {
  const Block& b = t.block;
  for (size_t i = 0; i < count; ++i) {
    const Block::Step& st = b.steps[i];
    ++result_.summary.steps;
    const PcInfo& info = info_for(*t.process, st.before.get(x86_64::RIP));
    if (t.stack.checkable() && info.checked && info.data) check(tid, t, st.before, info);
    const RegisterState& after = i + 1 < b.steps.size() ? b.steps[i + 1].before : b.end;
    size_t frames = t.stack.frames().size();
    result_.summary.resyncs += t.stack.executed(st.insn, st.before, after);
    if (t.stack.frames().size() > frames) ++result_.summary.calls;
  }
}

// The thread stopped while running a block: at its breakpoint, or earlier by a signal.
void Checker::block_stopped(pid_t tid, Thread& t, int sig) {
  Block& b = t.block;
  b.active = false;
  unplant(*t.process, b.end_pc);
  user_regs_struct now;
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &now) != 0) return;
  if (sig == SIGTRAP && now.rip == b.end_pc + 1) {
    now.rip = b.end_pc;
    ::ptrace(PTRACE_SETREGS, tid, nullptr, &now);
    RegisterState actual = to_register_state(now);
    for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r)
      if (b.end.has(r) && b.end.get(r) != actual.get(r)) {
        ++result_.summary.block_mismatches;
        break;
      }
    commit_block(tid, t, b.steps.size());
    at_instruction(tid, t, now);
    return;
  }
  // A signal before the end: the instructions before the pc ran; the one at the pc did not.
  size_t ran = 0;
  while (ran < b.steps.size() && b.steps[ran].before.get(x86_64::RIP) != now.rip)
    ++ran;
  if (ran == b.steps.size() && now.rip != b.end_pc) {
    ++result_.summary.block_mismatches; // nowhere in the block: nothing is trusted
    ran = 0;
  }
  commit_block(tid, t, ran);
  // Any signal but our breakpoint's is the program's (its int3 included: no step traps here).
  step_from(tid, t, now, sig);
}

} // namespace ehelf::check::detail
