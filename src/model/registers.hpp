// x86_64 DWARF register numbers (System V psABI, Figure 3.36) and their names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ehelf::x86_64 {

enum DwarfReg : uint16_t {
  RAX = 0,
  RDX = 1,
  RCX = 2,
  RBX = 3,
  RSI = 4,
  RDI = 5,
  RBP = 6,
  RSP = 7,
  R8 = 8,
  R9 = 9,
  R10 = 10,
  R11 = 11,
  R12 = 12,
  R13 = 13,
  R14 = 14,
  R15 = 15,
  RIP = 16, // the return-address column
};

// Columns tracked in a register state: the 17 general registers (incl. rip). Rules for other
// columns (vector registers, flags...) are kept in tables but not evaluated.
constexpr unsigned kGeneralRegs = 17;

// Name as readelf prints it ("rax", "xmm3", "fs.base"); empty for numbers with no name.
std::string_view register_name(unsigned regno);

// readelf's regname(), which takes an unsigned int: the name, else "r" and the number printed as
// a C int (truncation included, so the text matches readelf for absurd register numbers too).
std::string register_label(uint64_t regno);

} // namespace ehelf::x86_64
