// check::ShadowStack: frames from calls, returns and signals; saves tracked along the path.
#include "check/shadow_stack.hpp"

#include <algorithm>
#include <optional>

#include "model/registers.hpp"

namespace ehelf::check {
namespace {

// Where a signal handler on the same stack starts below the interrupted rsp: the red zone, the
// kernel's signal frame (with the largest xsave area) and alignment fit well within this.
constexpr uint64_t kSameStackReach = 64 * 1024;
constexpr uint64_t kRtSigreturn = 15; // x86_64 system call number
// rsp this far below the innermost frame's return-address slot is another stack (swapcontext,
// a coroutine switch): the frames cannot describe the code that runs there. No function's own
// frame is this large in practice; one that is only goes unchecked.
constexpr uint64_t kStackSwitch = uint64_t(1) << 20;

int callee_saved_index(uint16_t dwarf) {
  for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
    if (kCalleeSaved[i] == dwarf) return int(i);
  return -1;
}

bool is_branch(x86::Flow f) {
  using x86::Flow;
  return f == Flow::call || f == Flow::call_indirect || f == Flow::jump ||
         f == Flow::jump_conditional || f == Flow::jump_indirect || f == Flow::ret;
}

} // namespace

bool ShadowFrame::saved_at(unsigned i, uint64_t addr) const {
  return std::find(saves[i].begin(), saves[i].begin() + save_count[i], addr) !=
         saves[i].begin() + save_count[i];
}

void ShadowFrame::add_save(unsigned i, uint64_t addr) {
  if (saved_at(i, addr)) return;
  if (save_count[i] == saves[i].size()) { // keep the latest four
    std::rotate(saves[i].begin(), saves[i].begin() + 1, saves[i].end());
    --save_count[i];
  }
  saves[i][save_count[i]++] = addr;
}

void ShadowFrame::drop_save(unsigned i, uint64_t addr) {
  auto end = saves[i].begin() + save_count[i];
  auto it = std::find(saves[i].begin(), end, addr);
  if (it == end) return;
  std::copy(it + 1, end, it);
  --save_count[i];
}

void ShadowStack::push_call(const RegisterState& regs, uint64_t return_address, bool handler) {
  ShadowFrame f;
  f.slot = regs.get(x86_64::RSP);
  f.return_address = return_address;
  f.handler = handler;
  for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
    f.entry[i] = regs.get(kCalleeSaved[i]);
  frames_.push_back(f);
}

// Stores of a callee-saved register's entry value to a stack slot are saves. Any store ends the
// saves of the slot it overwrites with another value, whichever register (or none) it stores:
// after a tail call the callee shares its caller's frame, and its pushes go over the slots where
// the caller kept other registers.
void ShadowStack::track_saves(const x86::Instruction& insn, const RegisterState& before) {
  if (frames_.empty()) return;
  ShadowFrame& f = frames_.back();
  uint64_t rsp = before.get(x86_64::RSP); // as the ops run
  for (unsigned k = 0; k < insn.op_count; ++k) {
    const x86::StackOp& op = insn.ops[k];
    switch (op.kind) {
    case x86::StackOp::Kind::rsp_add:
      rsp += uint64_t(int64_t(op.disp));
      break;
    case x86::StackOp::Kind::copy:
      if (op.reg == x86::Reg::rsp)
        rsp = (op.base == x86::Reg::rsp ? rsp : before.get(dwarf_number(op.base))) +
              uint64_t(int64_t(op.disp));
      break;
    case x86::StackOp::Kind::store: {
      const uint64_t base = op.base == x86::Reg::rsp ? rsp : before.get(dwarf_number(op.base));
      const uint64_t addr = base + uint64_t(int64_t(op.disp));
      std::optional<uint64_t> value; // unknown for an immediate, the flags, memory
      if (op.reg != x86::Reg::none && op.reg != x86::Reg::rsp)
        value = before.get(dwarf_number(op.reg));
      for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
        if (!value || *value != f.entry[i]) f.drop_save(i, addr);
      if (int i = callee_saved_index(dwarf_number(op.reg)); i >= 0 && value == f.entry[i])
        f.add_save(unsigned(i), addr);
      break;
    }
    case x86::StackOp::Kind::push_memory: // a value from memory: whatever was saved there is gone
      for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
        f.drop_save(i, rsp);
      break;
    default:
      break;
    }
  }
}

unsigned ShadowStack::drop_dead_frames(const RegisterState& before, const RegisterState& after,
                                       bool ret, bool branch) {
  const uint64_t rsp = after.get(x86_64::RSP);
  unsigned irregular = 0, popped = 0;
  bool handler = false;
  Mode interrupted = Mode::normal;
  // A frame whose return-address slot is below rsp is over: ret popped it, or a longjmp or an
  // exception landing moved rsp above it.
  while (!frames_.empty() && frames_.back().slot < rsp) {
    bool plain_ret = ret && popped == 0 && frames_.back().slot == before.get(x86_64::RSP);
    if (!plain_ret) ++irregular;
    if (frames_.back().handler) {
      handler = true;
      interrupted = frames_.back().interrupted_mode;
    }
    frames_.pop_back();
    ++popped;
  }
  if (handler) {
    mode_ = Mode::sigreturn;
    after_sigreturn_ = interrupted;
  } else if (irregular)
    mode_ = branch ? Mode::normal : Mode::resync;
  else if (branch && mode_ == Mode::resync)
    mode_ = Mode::normal;
  else if (branch && mode_ == Mode::sigreturn) // siglongjmp out of a handler
    mode_ = Mode::normal;
  return irregular;
}

unsigned ShadowStack::executed(const x86::Instruction& insn, const RegisterState& before,
                               const RegisterState& after) {
  using x86::Flow;
  const bool sigreturn_call = insn.flow == Flow::syscall && before.get(x86_64::RAX) == kRtSigreturn;
  if (mode_ == Mode::altstack) {
    if (sigreturn_call && --altstack_depth_ == 0) {
      frames_.resize(std::min(frames_.size(), altstack_frames_));
      mode_ = Mode::normal;
    }
    return 0;
  }
  track_saves(insn, before);
  if ((insn.flow == Flow::call || insn.flow == Flow::call_indirect) &&
      after.get(x86_64::RSP) == before.get(x86_64::RSP) - 8)
    push_call(after, before.get(x86_64::RIP) + insn.length);
  if (insn.flow == Flow::syscall && mode_ == Mode::sigreturn) mode_ = after_sigreturn_;
  unsigned irregular =
      drop_dead_frames(before, after, insn.flow == Flow::ret, is_branch(insn.flow));
  const uint64_t rsp = after.get(x86_64::RSP);
  if (!frames_.empty() && rsp < frames_.back().slot && frames_.back().slot - rsp > kStackSwitch) {
    irregular += unsigned(frames_.size());
    frames_.clear(); // checks resume with the next call
  }
  return irregular;
}

unsigned ShadowStack::executed_unknown(const RegisterState& after) {
  if (mode_ == Mode::altstack) return 0;
  RegisterState before = after; // no plain ret: any frame dropped is a resynchronisation
  return drop_dead_frames(before, after, false, false);
}

unsigned ShadowStack::lost_track() {
  const auto n = unsigned(frames_.size());
  frames_.clear();
  mode_ = Mode::normal;
  return n;
}

void ShadowStack::signal_entered(const RegisterState& before, const RegisterState& after,
                                 uint64_t restorer) {
  if (mode_ == Mode::altstack) {
    ++altstack_depth_;
    return;
  }
  uint64_t from = before.get(x86_64::RSP), to = after.get(x86_64::RSP);
  if (to < from && from - to < kSameStackReach) {
    push_call(after, restorer, /*handler=*/true);
    frames_.back().interrupted_mode = mode_;
    mode_ = Mode::normal;
    return;
  }
  // An alternate signal stack: its frames cannot be told from the interrupted ones by rsp.
  mode_ = Mode::altstack;
  altstack_depth_ = 1;
  altstack_frames_ = frames_.size();
}

} // namespace ehelf::check
