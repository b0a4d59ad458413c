// x86::recognise_jump_table on dispatch sequences taken from gcc 12 and clang 14 output of
// tests/fixtures/synth_switch.c (bytes and addresses as objdump printed them), and on paths that
// must not be taken for a dispatch: no bound check, the bound on the wrong side, a table address
// clobbered before the jump, a register jump through a plain pointer.
#include <gtest/gtest.h>

#include <vector>

#include "x86/jump_table.hpp"

namespace ehelf::x86 {
namespace {

struct Insn {
  uint64_t address;
  std::vector<uint8_t> bytes;
};

std::optional<JumpTable> recognise(const std::vector<Insn>& insns) {
  std::vector<PathInstruction> path;
  for (const Insn& i : insns)
    path.push_back({i.address, i.bytes});
  return recognise_jump_table(path);
}

// clang -O2, PIE: cmp $0x7,%rbp; ja; mov %rax,%r12; lea 0xe34(%rip),%rax; movslq
// (%rax,%rbp,4),%rcx; add %rax,%rcx; jmp *%rcx.
const std::vector<Insn> kClangPic = {
    {0x11c0, {0x48, 0x83, 0xfd, 0x07}},
    {0x11c4, {0x77, 0x23}},
    {0x11c6, {0x49, 0x89, 0xc4}},
    {0x11c9, {0x48, 0x8d, 0x05, 0x34, 0x0e, 0x00, 0x00}},
    {0x11d0, {0x48, 0x63, 0x0c, 0xa8}},
    {0x11d4, {0x48, 0x01, 0xc1}},
    {0x11d7, {0xff, 0xe1}},
};

TEST(JumpTable, ClangPicDispatch) {
  auto t = recognise(kClangPic);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->table, 0x2004u);
  EXPECT_EQ(t->entries, 8u); // cmp $7 + ja: cases 0..7
  EXPECT_EQ(t->entry_size, 4u);
  EXPECT_TRUE(t->sign_extended);
  EXPECT_TRUE(t->relative);
  EXPECT_EQ(t->base, 0x2004u);
}

TEST(JumpTable, GccO0Dispatch) {
  // cmpq $0x7,-0x20(%rbp); ja; mov -0x20(%rbp),%rax; lea 0(,%rax,4),%rdx; lea 0xe04(%rip),%rax;
  // mov (%rdx,%rax,1),%eax; cltq; lea 0xdf8(%rip),%rdx; add %rdx,%rax; jmp *%rax.
  auto t = recognise({
      {0x11e2, {0x48, 0x83, 0x7d, 0xe0, 0x07}},
      {0x11e7, {0x0f, 0x87, 0x29, 0x01, 0x00, 0x00}},
      {0x11ed, {0x48, 0x8b, 0x45, 0xe0}},
      {0x11f1, {0x48, 0x8d, 0x14, 0x85, 0x00, 0x00, 0x00, 0x00}},
      {0x11f9, {0x48, 0x8d, 0x05, 0x04, 0x0e, 0x00, 0x00}},
      {0x1200, {0x8b, 0x04, 0x02}},
      {0x1203, {0x48, 0x98}},
      {0x1205, {0x48, 0x8d, 0x15, 0xf8, 0x0d, 0x00, 0x00}},
      {0x120c, {0x48, 0x01, 0xd0}},
      {0x120f, {0xff, 0xe0}},
  });
  ASSERT_TRUE(t);
  EXPECT_EQ(t->table, 0x2004u);
  EXPECT_EQ(t->entries, 8u);
  EXPECT_TRUE(t->relative && t->sign_extended);
  EXPECT_EQ(t->base, 0x2004u);
}

TEST(JumpTable, GccNonPieAbsoluteTable) {
  // cmp $0x7,%r11; ja dispatch.cold; jmp *0x402008(,%r11,8).
  auto t = recognise({
      {0x401255, {0x49, 0x83, 0xfb, 0x07}},
      {0x401259, {0x0f, 0x87, 0x21, 0xfe, 0xff, 0xff}},
      {0x40125f, {0x42, 0xff, 0x24, 0xdd, 0x08, 0x20, 0x40, 0x00}},
  });
  ASSERT_TRUE(t);
  EXPECT_EQ(t->table, 0x402008u);
  EXPECT_EQ(t->entries, 8u);
  EXPECT_EQ(t->entry_size, 8u);
  EXPECT_FALSE(t->relative);
}

TEST(JumpTable, NoBoundNoTable) {
  std::vector<Insn> path(kClangPic.begin() + 2, kClangPic.end());
  EXPECT_FALSE(recognise(path));
}

TEST(JumpTable, BoundOnTheWrongSide) {
  // A jb taken is in range, a jb falling through is not: the path falls through a jb here.
  std::vector<Insn> path = kClangPic;
  path[1] = {0x11c4, {0x72, 0x23}}; // jb 0x11e9; the path goes on at 0x11c6
  EXPECT_FALSE(recognise(path));
}

TEST(JumpTable, ClobberedTableAddress) {
  std::vector<Insn> path = kClangPic;
  // xor %eax,%eax between the load and the add: rax is no longer the table.
  path.insert(path.begin() + 5, {0x11d4, {0x31, 0xc0}});
  EXPECT_FALSE(recognise(path));
}

TEST(JumpTable, JumpThroughAPointerIsNoTable) {
  // mov 0x2eee(%rip),%rax; test %rax,%rax; je; jmp *%rax (a call through a pointer).
  EXPECT_FALSE(recognise({
      {0x10d3, {0x48, 0x8b, 0x05, 0xee, 0x2e, 0x00, 0x00}},
      {0x10da, {0x48, 0x85, 0xc0}},
      {0x10dd, {0x74, 0x09}},
      {0x10df, {0xff, 0xe0}},
  }));
}

} // namespace
} // namespace ehelf::x86
