// check::simulate: the registers after one instruction, from its x86 layer facts.
#include "check/straight_line.hpp"

#include "check/shadow_stack.hpp"
#include "model/registers.hpp"

namespace ehelf::check {

// The registers after `insn` from those before, as far as its ops determine them (a register
// loaded from memory or written otherwise becomes unknown). False when the run cannot go on
// through it: rsp unknown after it, or a save whose register or address is unknown.
bool simulate(const x86::Instruction& insn, const RegisterState& before, RegisterState& after) {
  after = before;
  bool defined[x86_64::kGeneralRegs] = {};
  for (unsigned k = 0; k < insn.op_count; ++k) {
    const x86::StackOp& op = insn.ops[k];
    const uint16_t reg = dwarf_number(op.reg), base = dwarf_number(op.base);
    switch (op.kind) {
    case x86::StackOp::Kind::rsp_add:
    case x86::StackOp::Kind::rsp_align:
      if (!after.has(x86_64::RSP)) return false;
      after.set(x86_64::RSP, op.kind == x86::StackOp::Kind::rsp_add
                                 ? after.get(x86_64::RSP) + uint64_t(int64_t(op.disp))
                                 : after.get(x86_64::RSP) & ~(uint64_t(op.disp) - 1));
      defined[x86_64::RSP] = true;
      break;
    case x86::StackOp::Kind::copy:
      if (after.has(base))
        after.set(reg, after.get(base) + uint64_t(int64_t(op.disp)));
      else
        after.clear(reg);
      defined[reg] = true;
      break;
    case x86::StackOp::Kind::store:
      // ShadowStack::track_saves reads the stored register and a non-rsp base as they were
      // before the instruction, rsp as the ops move it.
      if (op.reg != x86::Reg::none && !before.has(reg)) return false;
      if (base != x86_64::RSP && !before.has(base)) return false;
      if (!after.has(x86_64::RSP)) return false;
      break;
    case x86::StackOp::Kind::push_memory:
      break;
    case x86::StackOp::Kind::load:
    case x86::StackOp::Kind::unmodelled:
      after.clear(reg);
      defined[reg] = true;
      break;
    }
  }
  for (unsigned r = 0; r < x86::kGprCount; ++r) {
    const uint16_t d = dwarf_number(x86::Reg(r));
    if (insn.writes_reg(x86::Reg(r)) && !defined[d]) after.clear(d);
  }
  after.set(x86_64::RIP, before.get(x86_64::RIP) + insn.length);
  return after.has(x86_64::RSP);
}

} // namespace ehelf::check
