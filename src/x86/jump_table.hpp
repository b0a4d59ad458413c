// x86::recognise_jump_table: a compiled switch's indirect jump, recognised from the instructions
// of the path that leads to it: where its table is, what an entry holds, and how many entries
// the bound check before it lets through. Reading the table is the caller's business (it knows
// the file).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace ehelf::x86 {

// target(i) = (relative ? base : 0) + entry(i), entry(i) read at table + i * entry_size
// (4-byte entries sign-extended when `sign_extended`, else zero-extended).
struct JumpTable {
  uint64_t table = 0;
  uint32_t entries = 0; // from the bound check (`cmp $N,...; ja default`: N + 1)
  uint8_t entry_size = 0;
  bool sign_extended = false;
  bool relative = false;
  uint64_t base = 0;
};

// One instruction of the path: its address and the code from there on.
struct PathInstruction {
  uint64_t address = 0;
  std::span<const uint8_t> code;
};

// `path` in execution order, ending with the indirect jump (`jmp *%rax` after
// `movslq (%rdx,%rax,4),%rax; add %rdx,%rax` with rdx the table (PIC, gcc and clang, -O0's
// `mov (%rdx,%rax,1),%eax; cltq` too), or `jmp *table(,%rax,8)`), with the bound check
// (`cmp $N,reg|mem` or `sub $N,reg` then `ja`/`jae` falling through, or `jbe`/`jb` taken) somewhere
// before it. Nothing when the jump is not of that shape or no bound is found: the caller then does
// not guess.
std::optional<JumpTable> recognise_jump_table(std::span<const PathInstruction> path);

} // namespace ehelf::x86
