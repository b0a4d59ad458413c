// check::ShadowStack on its own: frames from calls, saves from the x86 layer's stack ops, frames
// dropped by ret, longjmp-like rsp moves and stack switches, signal handlers on the same stack and
// on an alternate one. The register states are made up; the instructions are assembled
// (x86_decode_cases.S), decoded by the x86 layer.
#include <gtest/gtest.h>

#include <map>

#include "check/shadow_stack.hpp"
#include "check/straight_line.hpp"
#include "model/registers.hpp"
#include "x86/decoder.hpp"

using namespace ehelf;
using namespace ehelf::check;

extern "C" const uint8_t x86_push_rbx[], x86_push_rbx_end[], x86_pop_rbx[], x86_pop_rbx_end[],
    x86_store_rsp_slot[], x86_store_rsp_slot_end[], x86_ret[], x86_ret_end[], x86_call_reg[],
    x86_call_reg_end[], x86_mov_rsp_mem[], x86_mov_rsp_mem_end[], x86_syscall[], x86_syscall_end[],
    x86_leave[], x86_leave_end[];

namespace {

x86::Instruction decode(const uint8_t* begin, const uint8_t* end) {
  static const x86::Decoder decoder;
  auto insn = decoder.decode({begin, size_t(end - begin)}, reinterpret_cast<uint64_t>(begin));
  EXPECT_TRUE(insn.ok());
  return insn.ok() ? *insn : x86::Instruction{};
}

RegisterState regs(uint64_t rsp, uint64_t rbx = 0x1111, uint64_t r12 = 0x2222) {
  RegisterState r;
  for (unsigned i = 0; i < x86_64::kGeneralRegs; ++i)
    r.set(i, 0x100 + i);
  r.set(x86_64::RSP, rsp);
  r.set(x86_64::RBX, rbx);
  r.set(x86_64::R12, r12);
  r.set(x86_64::RIP, 0x401000);
  return r;
}

// Applies `insn` to `before` the way the program would (rsp through the ops), for rsp only.
RegisterState after(const x86::Instruction& insn, const RegisterState& before) {
  RegisterState a;
  EXPECT_TRUE(simulate(insn, before, a));
  for (unsigned i = 0; i < x86_64::kGeneralRegs; ++i)
    if (!a.has(i)) a.set(i, 0xdead); // loaded or clobbered: some other value
  return a;
}

} // namespace

TEST(ShadowStack, SavesFollowPushesAndMovesOfEntryValues) {
  ShadowStack s;
  RegisterState entry = regs(0x7000);
  s.push_call(entry, 0x401234);
  ASSERT_EQ(s.frames().size(), 1u);
  EXPECT_EQ(s.frames()[0].slot, 0x7000u);
  // push %rbx: the entry value of rbx at 0x6ff8 (CFA-16).
  x86::Instruction push = decode(x86_push_rbx, x86_push_rbx_end);
  RegisterState a = after(push, entry);
  EXPECT_EQ(s.executed(push, entry, a), 0u);
  EXPECT_TRUE(s.frames()[0].saved_at(0, 0x6ff8));
  // mov %r12,0x10(%rsp): r12's entry value at 0x6ff8 + 0x10.
  x86::Instruction store = decode(x86_store_rsp_slot, x86_store_rsp_slot_end);
  s.executed(store, a, after(store, a));
  EXPECT_TRUE(s.frames()[0].saved_at(2, 0x7008));
  // The same store of a changed r12 is no save, and ends the one there.
  RegisterState changed = a;
  changed.set(x86_64::R12, 0x9999);
  s.executed(store, changed, after(store, changed));
  EXPECT_FALSE(s.frames()[0].saved_at(2, 0x7008));
  // pop %rbx keeps the save (the slot still holds it).
  x86::Instruction pop = decode(x86_pop_rbx, x86_pop_rbx_end);
  RegisterState b = after(pop, a);
  EXPECT_EQ(b.get(x86_64::RSP), 0x7000u);
  EXPECT_EQ(s.executed(pop, a, b), 0u);
  EXPECT_TRUE(s.frames()[0].saved_at(0, 0x6ff8));
  EXPECT_TRUE(s.checkable());
  // Another register's value stored over a save ends it (a tail-called function pushing over
  // its caller's slots): r12's entry value over rbx's at 0x6ff8 is r12's save only.
  RegisterState low = regs(0x6fe8);
  s.executed(store, low, after(store, low));
  EXPECT_FALSE(s.frames()[0].saved_at(0, 0x6ff8));
  EXPECT_TRUE(s.frames()[0].saved_at(2, 0x6ff8));
}

TEST(ShadowStack, CallsRetsAndResynchronisation) {
  ShadowStack s;
  s.push_call(regs(0x7000), 0x401234);
  // call *%rax from rsp 0x6fe0: a frame at 0x6fd8.
  x86::Instruction call = decode(x86_call_reg, x86_call_reg_end);
  RegisterState before = regs(0x6fe0), in_callee = regs(0x6fd8);
  s.executed(call, before, in_callee);
  ASSERT_EQ(s.frames().size(), 2u);
  EXPECT_EQ(s.frames()[1].slot, 0x6fd8u);
  EXPECT_EQ(s.frames()[1].return_address, 0x401000u + call.length);
  // ret from the slot: a plain pop, no resynchronisation.
  x86::Instruction ret = decode(x86_ret, x86_ret_end);
  EXPECT_EQ(s.executed(ret, regs(0x6fd8), regs(0x6fe0)), 0u);
  EXPECT_EQ(s.frames().size(), 1u);
  EXPECT_EQ(s.mode(), Mode::normal);
  // Two calls deep, then rsp jumps above both (longjmp's mov (%rdi),%rsp): resynchronised, and
  // nothing is checked until the next branch.
  s.executed(call, regs(0x6fe0), regs(0x6fd8));
  s.executed(call, regs(0x6f00), regs(0x6ef8));
  ASSERT_EQ(s.frames().size(), 3u);
  x86::Instruction jump_stack = decode(x86_mov_rsp_mem, x86_mov_rsp_mem_end);
  EXPECT_EQ(s.executed(jump_stack, regs(0x6ef8), regs(0x6fe8)), 2u);
  EXPECT_EQ(s.frames().size(), 1u);
  EXPECT_EQ(s.mode(), Mode::resync);
  EXPECT_FALSE(s.checkable());
  s.executed(ret, regs(0x6f00), regs(0x6f08)); // a branch (nothing left to pop)
  EXPECT_EQ(s.mode(), Mode::normal);
  // rsp far below the innermost frame: another stack; the frames cannot describe it.
  EXPECT_EQ(s.executed(jump_stack, regs(0x6f00), regs(0x7000 - (2 << 20))), 1u);
  EXPECT_TRUE(s.frames().empty());
}

TEST(ShadowStack, SignalHandlers) {
  ShadowStack s;
  s.push_call(regs(0x7000), 0x401234);
  // On the same stack: a frame whose return address is the restorer; after its ret, nothing
  // is checked until rt_sigreturn.
  s.signal_entered(regs(0x6f00), regs(0x6a08), 0x4ff000);
  ASSERT_EQ(s.frames().size(), 2u);
  EXPECT_TRUE(s.frames()[1].handler);
  EXPECT_TRUE(s.checkable());
  x86::Instruction ret = decode(x86_ret, x86_ret_end);
  s.executed(ret, regs(0x6a08), regs(0x6a10));
  EXPECT_EQ(s.mode(), Mode::sigreturn);
  EXPECT_FALSE(s.checkable());
  x86::Instruction syscall = decode(x86_syscall, x86_syscall_end);
  RegisterState sigreturn = regs(0x6a10);
  sigreturn.set(x86_64::RAX, 15);
  s.executed(syscall, sigreturn, regs(0x6f00));
  EXPECT_EQ(s.mode(), Mode::normal);
  EXPECT_EQ(s.frames().size(), 1u);
  // On an alternate stack (far away): nothing is tracked until its rt_sigreturn.
  s.signal_entered(regs(0x6f00), regs(0x10000), 0x4ff000);
  EXPECT_EQ(s.mode(), Mode::altstack);
  x86::Instruction call = decode(x86_call_reg, x86_call_reg_end);
  s.executed(call, regs(0x10000), regs(0xfff8));
  EXPECT_EQ(s.frames().size(), 1u);
  s.executed(syscall, sigreturn, regs(0x6f00));
  EXPECT_EQ(s.mode(), Mode::normal);
}

TEST(StraightLine, SimulateLeaveAndUnknowns) {
  // leave: rsp = rbp + 8, rbp loaded (unknown).
  x86::Instruction leave = decode(x86_leave, x86_leave_end);
  RegisterState before = regs(0x6000);
  before.set(x86_64::RBP, 0x6100);
  RegisterState a;
  ASSERT_TRUE(simulate(leave, before, a));
  EXPECT_EQ(a.get(x86_64::RSP), 0x6108u);
  EXPECT_FALSE(a.has(x86_64::RBP));
  EXPECT_EQ(a.get(x86_64::RIP), 0x401000u + leave.length);
  // A save of an unknown register cannot be judged: the run stops before it.
  x86::Instruction push = decode(x86_push_rbx, x86_push_rbx_end);
  RegisterState unknown_rbx = regs(0x6000);
  unknown_rbx.clear(x86_64::RBX);
  EXPECT_FALSE(simulate(push, unknown_rbx, a));
  // rsp from memory: unknown after, the run cannot go on through it.
  x86::Instruction jump_stack = decode(x86_mov_rsp_mem, x86_mov_rsp_mem_end);
  EXPECT_FALSE(simulate(jump_stack, regs(0x6000), a));
}
