// libFuzzer target for the trace of `ehelf check --record` (check/trace.hpp): read every record
// up to the end or the first error; every step's state must be within its bounds, and its
// recorded memory words are read back through RecordedMemory at every size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "check/trace.hpp"
#include "model/registers.hpp"

using namespace ehelf;
using namespace ehelf::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reader = TraceReader::over(std::span<const uint8_t>(data, size), "fuzz.trace");
  if (!reader) {
    if (!reader.error().has_offset || reader.error().offset > size) std::abort();
    return 0;
  }
  for (;;) {
    auto event = (*reader)->next();
    if (!event) {
      if (!event.error().has_offset || event.error().offset > size) std::abort();
      return 0;
    }
    if (*event == TraceReader::Event::end) return 0;
    if (*event == TraceReader::Event::module) continue;
    TraceReader& r = **reader;
    if (r.module() >= r.modules().size() || r.tid() <= 0) std::abort();
    if (r.regs().get(x86_64::RIP) != r.modules()[r.module()].bias + r.svma()) std::abort();
    for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
      if (r.frame().save_count[i] > 4) std::abort();
    RecordedMemory memory(r.reads());
    for (const MemoryWord& w : r.reads()) {
      uint64_t v = 0;
      if (w.size > 8) std::abort();
      for (size_t n = 0; n <= 8; ++n) // every size and offset around the word, within bounds
        (void)memory.read(w.address + n % 3, &v, n);
    }
  }
}
