#include "model/registers.hpp"

#include <fmt/format.h>

#include <array>

namespace ehelf::x86_64 {
namespace {

constexpr std::array<std::string_view, 126> kNames = {
    "rax",   "rdx",   "rcx",   "rbx",   "rsi",   "rdi",   "rbp",   "rsp",   "r8",      "r9",
    "r10",   "r11",   "r12",   "r13",   "r14",   "r15",   "rip",   "xmm0",  "xmm1",    "xmm2",
    "xmm3",  "xmm4",  "xmm5",  "xmm6",  "xmm7",  "xmm8",  "xmm9",  "xmm10", "xmm11",   "xmm12",
    "xmm13", "xmm14", "xmm15", "st0",   "st1",   "st2",   "st3",   "st4",   "st5",     "st6",
    "st7",   "mm0",   "mm1",   "mm2",   "mm3",   "mm4",   "mm5",   "mm6",   "mm7",     "rflags",
    "es",    "cs",    "ss",    "ds",    "fs",    "gs",    "",      "",      "fs.base", "gs.base",
    "",      "",      "tr",    "ldtr",  "mxcsr", "fcw",   "fsw",   "xmm16", "xmm17",   "xmm18",
    "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",   "xmm28",
    "xmm29", "xmm30", "xmm31", "",      "",      "",      "",      "",      "",        "",
    "",      "",      "",      "",      "",      "",      "",      "",      "",        "",
    "",      "",      "",      "",      "",      "",      "",      "",      "",        "",
    "",      "",      "",      "",      "",      "",      "",      "",      "k0",      "k1",
    "k2",    "k3",    "k4",    "k5",    "k6",    "k7",
};

} // namespace

std::string_view register_name(unsigned regno) {
  return regno < kNames.size() ? kNames[regno] : std::string_view();
}

std::string register_label(uint64_t regno) {
  auto r = static_cast<unsigned>(regno);
  std::string_view name = register_name(r);
  if (!name.empty()) return std::string(name);
  return fmt::format("r{}", static_cast<int>(r));
}

} // namespace ehelf::x86_64
