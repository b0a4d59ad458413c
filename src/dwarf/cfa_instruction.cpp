#include "dwarf/cfa_instruction.hpp"

#include <fmt/format.h>

#include "dwarf/cfi_limits.hpp"
#include "dwarf/constants.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf {

Status decode_cfa_step(const CfiSection& section, ByteCursor& c, const Cie& cie,
                       const PointerBases& bases, CfaInstruction& in) {
  const char* problem = decode_cfa_instruction(c, cie, bases, in);
  if (!problem) return Ok{};
  std::string_view p = problem;
  if (p == "unknown call frame instruction")
    return Error::at(section.name, in.offset,
                     fmt::format("unknown call frame instruction {:#04x}", in.opcode));
  if (p == "truncated operand")
    return Error::at(section.name, in.offset,
                     fmt::format("truncated operand of {}", dw::cfa_name(in.opcode)));
  return Error::at(section.name, in.offset, std::string(p));
}

Result<std::vector<CfaInstruction>> decode_cfa_program(const CfiSection& section, const Cie& cie,
                                                       const Fde* fde, const PointerBases& bases) {
  std::span<const uint8_t> bytes = fde ? fde->instructions : cie.instructions;
  ByteCursor c(bytes, fde ? fde->instructions_offset : cie.instructions_offset);
  std::vector<CfaInstruction> out;
  while (!c.at_end()) {
    CfaInstruction in;
    if (auto st = decode_cfa_step(section, c, cie, bases, in); !st) return std::move(st).error();
    if (out.size() == cfi_limits::kMaxInstructionsPerProgram)
      return Error::at(section.name, in.offset,
                       fmt::format("more than {} instructions in one program: refused",
                                   cfi_limits::kMaxInstructionsPerProgram));
    out.push_back(in);
  }
  return out;
}

} // namespace ehelf
