// libFuzzer target: arbitrary bytes as an .eh_frame or .debug_frame section. Parses every entry,
// interprets every FDE into a table, evaluates each row on a fixed register state, and renders
// the readelf text, all of which must stay in bounds and terminate.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "dwarf/cfa_interpreter.hpp"
#include "dwarf/cfi_section.hpp"
#include "report/readelf_frames.hpp"

namespace {

class SmallStack final : public ehelf::MemoryReader {
public:
  bool read(uint64_t addr, void* out, size_t size) override {
    if (addr < 0x7000 || addr > 0x7000 + sizeof(words_) || 0x7000 + sizeof(words_) - addr < size)
      return false;
    std::memcpy(out, reinterpret_cast<const uint8_t*>(words_) + (addr - 0x7000), size);
    return true;
  }

private:
  uint64_t words_[32] = {0x401000, 0x7010, 3, 4, 5, 6, 7, 8};
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto format = (data[0] & 1) ? ehelf::CfiFormat::DebugFrame : ehelf::CfiFormat::EhFrame;
  std::span<const uint8_t> bytes(data + 1, size - 1);
  ehelf::PointerBases bases;
  bases.section_addr = 0x2000;
  ehelf::CfiSection s = ehelf::parse_cfi_section(bytes, format, ".eh_frame", bases);
  ehelf::UnwindTable table;
  ehelf::CfaInterpreter interp(table);
  for (const ehelf::Fde& f : s.fdes) {
    auto st = interp.run(s, s.cies[f.cie], f, bases, [&](const ehelf::InterpretedRow& r) {
      uint32_t row = table.intern_row(r.state->cfa, r.state->columns);
      table.add_range(ehelf::TableRange{r.begin, r.end, row, 0, r.state->args_size});
    });
    (void)st;
  }
  table.finish();
  SmallStack stack;
  ehelf::RegisterState regs;
  for (unsigned r = 0; r < ehelf::x86_64::kGeneralRegs; ++r)
    regs.set(r, 0x7000 + 8 * r);
  for (uint32_t i = 0; i < table.row_count(); ++i)
    (void)table.evaluate(i, regs, stack);
  std::string text;
  (void)ehelf::render_readelf_frame_section(
      bytes, 0x2000, format == ehelf::CfiFormat::EhFrame ? ".eh_frame" : ".debug_frame", text);
  return 0;
}
