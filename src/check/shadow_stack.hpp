// check::ShadowStack: one thread's frames as the execution made them (calls, returns, signal
// handlers), and the state machine that keeps it in step with rsp when the program leaves
// frames another way (longjmp, exceptions, sigreturn).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/register_state.hpp"
#include "x86/abi.hpp"
#include "x86/instruction.hpp"

namespace ehelf::check {

// The callee-saved registers of the x86_64 System V ABI, in DWARF numbering.
inline constexpr auto& kCalleeSaved = x86::kCalleeSavedDwarf;

// What the checker may compare in the current state of a thread.
enum class Mode : uint8_t {
  normal,    // the innermost frame is known: check
  resync,    // frames were dropped because rsp moved above them (longjmp, exception landing):
             // until the next branch the pc is in code whose frame is gone
  sigreturn, // a handler returned into the restorer: until its rt_sigreturn (or a branch)
  altstack,  // in a handler on an alternate stack: nothing is tracked until its sigreturn
};

struct ShadowFrame {
  uint64_t slot = 0;           // where the return address is (rsp right after the call)
  uint64_t return_address = 0; // what was pushed there
  bool handler = false;        // a signal handler's frame (its return address: the restorer)
  Mode interrupted_mode = Mode::normal; // handler frames: the mode to return to after sigreturn
  // Per callee-saved register (kCalleeSaved order): its value at entry, and up to four slots
  // where the code stored that value since.
  std::array<uint64_t, 6> entry{};
  std::array<std::array<uint64_t, 4>, 6> saves{};
  std::array<uint8_t, 6> save_count{};

  bool saved_at(unsigned i, uint64_t addr) const;
  void add_save(unsigned i, uint64_t addr);
  void drop_save(unsigned i, uint64_t addr);
};

class ShadowStack {
public:
  const std::vector<ShadowFrame>& frames() const { return frames_; }
  Mode mode() const { return mode_; }
  bool checkable() const { return mode_ == Mode::normal && !frames_.empty(); }

  // The frame of a function entered at `regs` (rsp at the return address).
  void push_call(const RegisterState& regs, uint64_t return_address, bool handler = false);
  // Updates the stack for `insn` executed from `before` to `after`. Returns the number of
  // frames dropped other than by a plain ret (a resynchronisation), 0 usually.
  unsigned executed(const x86::Instruction& insn, const RegisterState& before,
                    const RegisterState& after);
  // An instruction that could not be decoded was executed: only rsp is trusted.
  unsigned executed_unknown(const RegisterState& after);
  // The thread ran unobserved to somewhere else in its stack: every frame is forgotten (checks
  // resume with the next call). Returns how many.
  unsigned lost_track();
  // A signal handler was entered at `after` from `before`; `restorer` is its return address.
  void signal_entered(const RegisterState& before, const RegisterState& after, uint64_t restorer);

private:
  unsigned drop_dead_frames(const RegisterState& before, const RegisterState& after, bool ret,
                            bool branch);
  void track_saves(const x86::Instruction& insn, const RegisterState& before);

  std::vector<ShadowFrame> frames_;
  Mode mode_ = Mode::normal;
  Mode after_sigreturn_ = Mode::normal;
  unsigned altstack_depth_ = 0;
  size_t altstack_frames_ = 0; // frames_ size when the alternate stack was entered
};

// DWARF number of an x86 layer register.
using x86::dwarf_number;

} // namespace ehelf::check
