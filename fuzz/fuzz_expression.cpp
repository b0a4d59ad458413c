// libFuzzer target for Expression: decode arbitrary bytes; whatever decodes is printed and
// evaluated against a small readable buffer, with every register known.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "model/expression.hpp"
#include "report/expression_text.hpp"

namespace {

// Readable memory: 256 bytes at a fixed address holding addresses back into itself, so that
// deref chains stay inside it. Everything else is refused, like an unmapped page.
class BufferMemory final : public ehelf::MemoryReader {
public:
  static constexpr uint64_t kBase = 0x10000;
  static constexpr size_t kSize = 256;

  BufferMemory() {
    for (size_t i = 0; i < kSize; i += 8) {
      uint64_t v = kBase + (i * 5 + 8) % kSize;
      std::memcpy(bytes_ + i, &v, sizeof v);
    }
  }
  bool read(uint64_t addr, void* out, size_t size) override {
    if (addr < kBase || addr - kBase > kSize || size > kSize - (addr - kBase)) return false;
    std::memcpy(out, bytes_ + (addr - kBase), size);
    return true;
  }

private:
  uint8_t bytes_[kSize];
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the address size, so the 4-byte decoding path is fuzzed too.
  uint8_t address_size = 8;
  if (size > 0 && data[0] == 0xff) {
    address_size = 4;
    ++data;
    --size;
  }
  auto expr = ehelf::Expression::decode(std::span<const uint8_t>(data, size), address_size);
  if (!expr.ok()) return 0;

  std::string text = ehelf::expression_text(*expr);
  if (!expr->ops().empty() && text.empty()) __builtin_trap();
  for (const ehelf::ExprOp& op : expr->ops()) {
    if (op.offset >= size) __builtin_trap();
    if ((op.opcode == 0x28 || op.opcode == 0x2f) && op.b > expr->ops().size()) __builtin_trap();
  }

  ehelf::RegisterState regs;
  for (unsigned r = 0; r < ehelf::x86_64::kGeneralRegs; ++r)
    regs.set(r, BufferMemory::kBase + 8 * r);
  BufferMemory mem;
  // Small limits keep each input fast even when it loops.
  ehelf::EvalLimits limits{2000, 32};
  (void)expr->evaluate(regs, mem, std::nullopt, std::nullopt, limits);
  (void)expr->evaluate(regs, mem, BufferMemory::kBase + 16, BufferMemory::kBase + 16, limits);
  return 0;
}
