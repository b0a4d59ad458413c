// libFuzzer target: arbitrary bytes as a perf.data file (file or pipe layout). Parses the header,
// attributes and features, decodes every record (decompressing perf record -z data) round by
// round as ehelf perf does (RecordStream), and feeds them to a SampleUnwinder (no symbols), which
// follows the recorded processes and unwinds each sample's stack copy. Mapped files named by the
// recording are opened from this machine's disk when they exist (as `ehelf perf` does). The same
// bytes are also read from a pipe (PerfData::read_stream: `perf record -o - | ehelf perf`).
// Errors must be one line naming the input and an offset.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "perf/perf_data.hpp"
#include "perf/record_stream.hpp"
#include "perf/sample_unwinder.hpp"

namespace {

volatile uint64_t sink; // keeps the reads of every decoded byte

void check_error(const ehelf::Error& e) {
  const std::string s = e.to_string();
  if (!e.has_offset || s.find('\n') != std::string::npos || s.rfind("fuzz.data: offset 0x", 0) != 0)
    std::abort();
}

// Every record the stream gives, each decoded byte read.
uint64_t drain(const ehelf::perf::PerfData& perf, ehelf::perf::SampleUnwinder* unwinder) {
  using namespace ehelf::perf;
  RecordStream records(perf);
  SampleStack stack;
  uint64_t sum = 0;
  while (const Record* r = records.next()) {
    if (const auto* s = std::get_if<SampleRecord>(&r->body)) {
      for (size_t i = 0; i < s->callchain_size(); ++i)
        sum += s->callchain_at(i);
      for (uint8_t b : s->stack_data())
        sum += b;
    }
    if (unwinder && unwinder->feed(*r, stack)) sum += stack.frames.size();
  }
  if (records.damage()) check_error(*records.damage());
  return sum;
}

// The bytes through a pipe (large enough to hold them: no writer thread), read as a stream.
void through_a_pipe(const uint8_t* data, size_t size) {
  int fds[2];
  if (size > (1u << 20) || ::pipe(fds) != 0) return;
  if (::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20) < int(size)) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  const bool written = ::write(fds[1], data, size) == static_cast<ssize_t>(size);
  ::close(fds[1]);
  if (written) {
    auto perf = ehelf::perf::PerfData::read_stream(fds[0], "fuzz.data");
    if (!perf)
      check_error(perf.error());
    else
      sink = drain(*perf, nullptr);
  }
  ::close(fds[0]);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ehelf::perf;
  auto perf = PerfData::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.data");
  if (!perf) {
    check_error(perf.error());
    through_a_pipe(data, size);
    return 0;
  }
  (void)perf->attr_for_id(0);
  SampleUnwinderOptions options;
  options.symbols = false;
  options.max_depth = 128;
  SampleUnwinder unwinder(*perf, options);
  sink = drain(*perf, &unwinder);
  through_a_pipe(data, size);
  return 0;
}
