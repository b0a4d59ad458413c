// A coroutine started by makecontext: its first function's return address is the entry of
// glibc's __start_context, which no FDE before it covers. Every walk (general step, fast walk)
// unwinds it from its entry, as gdb does (the same rule the C API always had).
#include <gtest/gtest.h>

#include <ucontext.h>

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/local.hpp"
#include "runtime/unwinder.hpp"

namespace ehelf {
namespace {

ucontext_t g_main, g_coroutine;
std::vector<uint8_t> g_stack(256 * 1024);
std::vector<uint64_t> g_general, g_fast;
StopReason g_general_why = StopReason::None, g_fast_why = StopReason::None;

__attribute__((noinline)) void coroutine_body() {
  RegisterState regs = capture_local();
  static ModuleMap map = ModuleMap::for_self();
  Unwinder u(map);
  const AddressRange stack{reinterpret_cast<uint64_t>(g_stack.data()),
                           reinterpret_cast<uint64_t>(g_stack.data()) + g_stack.size()};
  LocalMemory mem(stack);
  FrameInfo out[64];
  const size_t n = u.backtrace(regs, mem, out, 64, &g_general_why, FrameAddress::ReturnAddress);
  for (size_t i = 0; i < n; ++i)
    g_general.push_back(out[i].pc);
  uint64_t pcs[64];
  const size_t m =
      u.backtrace_local(regs, stack, pcs, 64, &g_fast_why, FrameAddress::ReturnAddress);
  g_fast.assign(pcs, pcs + m);
  asm volatile("" ::: "memory"); // keeps this a call, not a tail call
}

__attribute__((noinline)) void coroutine_start() {
  coroutine_body();
  asm volatile("" ::: "memory");
}

// The frame after the coroutine's first function is __start_context, at its very entry (the
// start of one of libc's FDEs). It is unwound from there, as gdb does: gdb's backtrace of the
// same coroutine shows one more frame after it (the uc_link word makecontext stored above the
// return address, which __start_context's entry row takes as its return address).
TEST(RuntimeMakecontext, WalksUnwindStartContextFromItsEntry) {
  ASSERT_EQ(::getcontext(&g_coroutine), 0);
  g_coroutine.uc_stack.ss_sp = g_stack.data();
  g_coroutine.uc_stack.ss_size = g_stack.size();
  g_coroutine.uc_link = &g_main;
  ::makecontext(&g_coroutine, coroutine_start, 0);
  ASSERT_EQ(::swapcontext(&g_main, &g_coroutine), 0);
  ModuleMap map = ModuleMap::for_self();
  const auto start = reinterpret_cast<uint64_t>(&coroutine_start);
  EXPECT_EQ(g_general, g_fast);
  for (const auto* walk : {&g_general, &g_fast}) {
    std::string joined;
    for (uint64_t pc : *walk)
      joined += fmt::format("{:#x} ", pc);
    // [0] coroutine_body, [1] coroutine_start, [2] __start_context's entry, [3] beyond it.
    ASSERT_GE(walk->size(), 4u) << joined;
    EXPECT_GT((*walk)[1], start) << joined;
    EXPECT_LT((*walk)[1], start + 64) << joined;
    const uint64_t entry = (*walk)[2];
    const Module* libc = map.find(entry);
    ASSERT_TRUE(libc) << joined;
    const ModuleData& data = map.load(*libc);
    auto fn = data.function_at(entry - libc->bias);
    ASSERT_TRUE(fn) << joined;
    EXPECT_EQ(fn->pc_begin, entry - libc->bias) << joined;
    EXPECT_EQ((*walk)[3], reinterpret_cast<uint64_t>(&g_main)) << joined;
  }
}

} // namespace
} // namespace ehelf
