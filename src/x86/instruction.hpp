// x86::Instruction: what one x86_64 instruction does to control flow and to the stack, in
// arch-neutral terms (objtool's stack_op): the facts the validator and the synthesizer need.
// Nothing here knows about DWARF or ptrace.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace ehelf::x86 {

// The 16 general-purpose registers in hardware encoding order (ModRM numbering), not DWARF's.
// A write to a sub-register (eax, ax, al) counts as a write to the whole register.
enum class Reg : uint8_t {
  rax,
  rcx,
  rdx,
  rbx,
  rsp,
  rbp,
  rsi,
  rdi,
  r8,
  r9,
  r10,
  r11,
  r12,
  r13,
  r14,
  r15,
  none, // not a general-purpose register (an immediate, flags, memory, a return address)
};
constexpr int kGprCount = 16;
std::string_view reg_name(Reg r); // "rax" ... "r15", "none"

// Where execution goes after the instruction.
enum class Flow : uint8_t {
  next,             // falls through to the next instruction
  call,             // direct call; target is set
  call_indirect,    // call through a register or memory
  jump,             // direct unconditional jump; target is set
  jump_conditional, // jcc, loop*, jrcxz, xbegin: target (set) or fall through
  jump_indirect,    // jmp through a register or memory (tail call, switch, PLT stub)
  ret,              // near return (the pop of the return address is not among the ops)
  syscall,          // syscall, sysenter, int $0x80: returns to the next instruction
  trap,             // hlt, ud0/ud1/ud2, int3, int1: does not continue to the next instruction
  other,            // far call/jmp/ret, iret, sysret, int N, into...: control flow not modelled
};
std::string_view flow_name(Flow f);

// One elementary effect on the stack pointer, the frame pointer or a stack slot, in execution
// order. `push %rbx` is {rsp_add -8, store rbx -> 0(rsp)}; `pop %rbx` is {load rbx <- 0(rsp),
// rsp_add 8}; `leave` is {copy rsp = rbp + 0, load rbp <- 0(rsp), rsp_add 8}.
struct StackOp {
  enum class Kind : uint8_t {
    rsp_add,     // rsp += disp (push, pop, pushf, popf, sub/add $imm, lea disp(%rsp),%rsp, ret $N)
    rsp_align,   // rsp &= -disp (and $-16,%rsp): lowered to an unknown multiple of disp
    copy,        // reg = base + disp, where reg or base is rsp or rbp (mov %rsp,%rbp,
                 // mov %rbp,%rsp, lea 8(%rsp),%r10 for DRAP, lea -8(%r10),%rsp)
    store,       // disp(base) = reg, 8 bytes, base rsp or rbp (push, mov %rbx,-8(%rbp)); reg is
                 // none when the value is not a register (immediate, flags, memory)
    push_memory, // 0(rsp) = the 8 bytes at disp(base) (push -8(%r10), the DRAP return address)
    load,        // reg = disp(base), 8 bytes, base rsp or rbp (pop, mov -8(%rbp),%rbx)
    unmodelled,  // reg (rsp or rbp) is written in a way not described above (xchg, sub %rax,%rsp,
                 // mov (%rdi),%rsp, pop %rsp, xor %ebp,%ebp...): its new value is unknown
  };
  Kind kind;
  Reg reg = Reg::none;
  Reg base = Reg::none;
  int32_t disp = 0;

  bool operator==(const StackOp&) const = default;
};

// One decoded instruction.
struct Instruction {
  uint64_t address = 0;
  uint64_t target = 0; // for direct calls and jumps (Flow call, jump, jump_conditional)
  // An absolute address the instruction puts in a register as a value, 0 if none: `lea
  // disp(%rip),%reg` (the next instruction's address + disp) or `mov $imm,%reg`. Code takes the
  // address of a function this way (main in _start, callbacks), PIE or not.
  uint64_t address_value = 0;
  bool address_value_immediate = false; // from `mov $imm` (no position-independent code does it)
  Reg value_register = Reg::none;       // the register address_value (or `mov $0`'s 0) goes to
  // For call_indirect and jump_indirect through memory named by address (`call *disp(%rip)`
  // to a GOT slot, a PLT stub's `jmp *disp(%rip)`): the slot's address; else 0.
  uint64_t indirect_slot = 0;
  // Alignment padding compilers put between and inside functions: nop in any of its forms
  // (`data16 cs nopw 0x0(%rax,%rax,1)`...) and int3.
  bool padding = false;
  uint16_t writes = 0; // bit i: the instruction writes general register Reg(i)
  uint8_t length = 0;  // 1..15 bytes
  Flow flow = Flow::next;
  uint8_t op_count = 0; // ops[0..op_count) in execution order
  std::array<StackOp, 4> ops{};

  bool has_target() const {
    return flow == Flow::call || flow == Flow::jump || flow == Flow::jump_conditional;
  }
  bool writes_reg(Reg r) const { return r != Reg::none && (writes >> unsigned(r)) & 1; }
  // The sum of the rsp_add ops: rsp's change when no other op touches rsp.
  int32_t rsp_delta() const;
};

} // namespace ehelf::x86
