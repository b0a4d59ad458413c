// libFuzzer target: arbitrary bytes as a perf.data file (file or pipe layout). Parses the header,
// attributes and features, decodes every record (decompressing perf record -z data), and feeds
// them in time order to a SampleUnwinder (no symbols), which follows the recorded processes and
// unwinds each sample's stack copy. Mapped files named by the recording are opened from this
// machine's disk when they exist (as `ehelf perf` does). Errors must be one line naming the input
// and an offset.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "perf/perf_data.hpp"
#include "perf/sample_unwinder.hpp"

namespace {

volatile uint64_t sink; // keeps the reads of every decoded byte

void check_error(const ehelf::Error& e) {
  const std::string s = e.to_string();
  if (!e.has_offset || s.find('\n') != std::string::npos || s.rfind("fuzz.data: offset 0x", 0) != 0)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ehelf::perf;
  auto perf = PerfData::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.data");
  if (!perf) {
    check_error(perf.error());
    return 0;
  }
  (void)perf->attr_for_id(0);
  auto records = perf->records();
  if (!records) {
    check_error(records.error());
    return 0;
  }
  SampleUnwinderOptions options;
  options.symbols = false;
  options.max_depth = 128;
  SampleUnwinder unwinder(*perf, options);
  SampleStack stack;
  uint64_t sum = 0;
  for (const Record* r : SampleUnwinder::time_ordered(*records)) {
    if (const auto* s = std::get_if<SampleRecord>(&r->body)) {
      for (size_t i = 0; i < s->callchain_size(); ++i)
        sum += s->callchain_at(i);
      for (uint8_t b : s->stack_data())
        sum += b;
    }
    if (unwinder.feed(*r, stack)) sum += stack.frames.size();
  }
  sink = sum;
  return 0;
}
