// x86::Decoder: decodes x86_64 machine code (Zydis) into x86::Instruction facts, and formats an
// instruction as text (AT&T syntax) for reports.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "support/result.hpp"
#include "x86/instruction.hpp"

namespace ehelf::x86 {

class Decoder {
public:
  Decoder();
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Decodes the instruction starting at code[0], which the program sees at `address` (for
  // direct targets). Reads at most code.size() bytes (and at most 15). An undecodable or
  // truncated instruction is an error whose offset is `address`.
  Result<Instruction> decode(std::span<const uint8_t> code, uint64_t address) const;

  // Decodes code[0...] (at `address`) one instruction after the other, calling
  // visit(instruction, offset) for each: true takes it and goes on, false stops there. Returns
  // the offset it stopped at: code.size(), the instruction `visit` refused, or the first that
  // does not decode. (Linear sweeps: compilers put no data between a function's instructions.)
  template <typename Visit>
  uint64_t sweep(std::span<const uint8_t> code, uint64_t address, Visit&& visit) const {
    uint64_t off = 0;
    while (off < code.size()) {
      auto in = decode(code.subspan(off), address + off);
      if (!in || !visit(*in, off)) break;
      off += in->length;
    }
    return off;
  }

  // The instruction at code[0] in AT&T syntax with absolute targets, e.g. "push %rbx",
  // "call 0x401020", "mov %rsp, %rbp" (Zydis's spelling); "(bad)" if it does not decode.
  std::string format(std::span<const uint8_t> code, uint64_t address) const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace ehelf::x86
