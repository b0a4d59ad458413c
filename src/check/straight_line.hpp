// check::Block and simulate(): straight-line runs of a program executed at once, up to a
// breakpoint, and checked afterwards from the register values the x86 layer's effects give
// each instruction from the run's starting state.
#pragma once

#include <cstdint>
#include <vector>

#include "model/register_state.hpp"
#include "x86/instruction.hpp"

namespace ehelf::check {

// A straight-line run of instructions executed at once, up to a breakpoint: the register
// values before each, as far as the x86 layer's effects determine them from the run's start.
struct Block {
  struct Step {
    RegisterState before;
    x86::Instruction insn;
  };
  std::vector<Step> steps;
  RegisterState end;   // before the instruction at the breakpoint
  uint64_t end_pc = 0; // where the breakpoint is
  bool active = false;
};

// At most this many instructions per run: the plan keeps every instruction's registers, and a
// longer straight path is rare (runs end at conditional branches).
constexpr size_t kMaxBlock = 256;

// The registers after `insn` from those before, as far as its ops determine them (a register
// loaded from memory or written otherwise becomes unknown). False when the run cannot go on
// through it: rsp unknown after it, or a save whose register or address is unknown.
bool simulate(const x86::Instruction& insn, const RegisterState& before, RegisterState& after);

} // namespace ehelf::check
