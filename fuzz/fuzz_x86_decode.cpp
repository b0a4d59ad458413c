// libFuzzer target for the x86 layer: decodes the input linearly as x86_64 code (skipping a byte
// where nothing decodes) and formats each instruction; every fact must be within its bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "x86/decoder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ehelf::x86::Decoder decoder;
  std::span<const uint8_t> code(data, size);
  const uint64_t base = 0x400000;
  for (size_t at = 0; at < code.size();) {
    auto insn = decoder.decode(code.subspan(at), base + at);
    if (!insn.ok()) {
      if (insn.error().offset != base + at) std::abort();
      ++at;
      continue;
    }
    if (insn->length == 0 || insn->length > 15 || insn->length > code.size() - at) std::abort();
    if (insn->op_count > insn->ops.size()) std::abort();
    if (unsigned(insn->flow) > unsigned(ehelf::x86::Flow::other)) std::abort();
    for (unsigned i = 0; i < insn->op_count; ++i) {
      const auto& op = insn->ops[i];
      if (unsigned(op.kind) > unsigned(ehelf::x86::StackOp::Kind::unmodelled)) std::abort();
      if (unsigned(op.reg) > ehelf::x86::kGprCount || unsigned(op.base) > ehelf::x86::kGprCount)
        std::abort();
    }
    if (decoder.format(code.subspan(at), base + at) == "(bad)") std::abort();
    at += insn->length;
  }
  return 0;
}
