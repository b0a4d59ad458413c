// x86::abi: the x86_64 System V facts that the decoder's users share, written once: how the
// hardware numbers registers against DWARF (psABI figure 3.36), which registers a callee
// preserves, and the endbr64 marker that starts CET-enabled functions and landing pads.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

#include "x86/instruction.hpp"

namespace ehelf::x86 {

// DWARF register numbers of the registers unwind tables name.
namespace dwarf {
inline constexpr uint16_t kRax = 0, kRdx = 1, kRcx = 2, kRbx = 3, kRsi = 4, kRdi = 5, kRbp = 6,
                          kRsp = 7, kR12 = 12, kR13 = 13, kR14 = 14, kR15 = 15, kReturnAddress = 16;
} // namespace dwarf

// Hardware order is rax rcx rdx rbx rsp rbp rsi rdi r8-r15; DWARF's is rax rdx rcx rbx rsi rdi
// rbp rsp r8-r15. Reg::none has no DWARF number: UINT16_MAX.
constexpr uint16_t dwarf_number(Reg r) {
  constexpr uint16_t map[kGprCount] = {0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};
  return unsigned(r) < unsigned(kGprCount) ? map[unsigned(r)] : UINT16_MAX;
}

// The registers a callee preserves (rsp aside), in the order unwind rows list them.
inline constexpr std::array<Reg, 6> kCalleeSaved = {Reg::rbx, Reg::rbp, Reg::r12,
                                                    Reg::r13, Reg::r14, Reg::r15};
// The same, in DWARF numbering.
inline constexpr std::array<uint16_t, 6> kCalleeSavedDwarf = [] {
  std::array<uint16_t, 6> out{};
  for (size_t i = 0; i < kCalleeSaved.size(); ++i)
    out[i] = dwarf_number(kCalleeSaved[i]);
  return out;
}();
static_assert(kCalleeSavedDwarf == std::array<uint16_t, 6>{3, 6, 12, 13, 14, 15});

constexpr bool callee_saved(Reg r) {
  return std::find(kCalleeSaved.begin(), kCalleeSaved.end(), r) != kCalleeSaved.end();
}

// endbr64 (f3 0f 1e fa): the first instruction of code built with -fcf-protection wherever an
// indirect branch may land (function entries, landing pads).
inline constexpr std::array<uint8_t, 4> kEndbr64 = {0xf3, 0x0f, 0x1e, 0xfa};
inline bool starts_with_endbr64(std::span<const uint8_t> bytes) {
  return bytes.size() >= kEndbr64.size() &&
         std::equal(kEndbr64.begin(), kEndbr64.end(), bytes.begin());
}

} // namespace ehelf::x86
