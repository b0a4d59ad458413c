// for_each_stack, the two-stage pipeline of ehelf perf (read and unwind on one thread, name on
// another): what two threads give is what one gives. The recordings are built in memory
// (perf_recording.hpp).
#include <gtest/gtest.h>

#include "perf/record_stream.hpp"
#include "perf/sample_unwinder.hpp"
#include "perf/stack_pipeline.hpp"
#include "perf_recording.hpp"
#include "test_support.hpp"

namespace ehelf::perf {
namespace {

// Every sample's stack, as one line of its fields and frames, through for_each_stack.
std::vector<std::string> stacks_of(const Built& b, unsigned threads) {
  auto d = PerfData::from_bytes(b.bytes, kName);
  EXPECT_TRUE(d);
  if (!d) return {};
  SampleUnwinderOptions options;
  options.symbols = false;
  SampleUnwinder unwinder(*d, options);
  RecordStream records(*d);
  std::vector<std::string> lines;
  StackPipelineOptions po;
  po.threads = threads;
  for_each_stack(
      records, unwinder,
      [&](const SampleStack& s) {
        std::string line =
            fmt::format("{} {}/{} {} {} [{}] {}{}:", s.comm, s.pid, s.tid, s.time, s.period, s.stop,
                        s.ip_only ? "ip-only " : "", s.frames.size());
        for (const StackFrame& f : s.frames)
          line += fmt::format(" {:#x} {} {}+{:#x} {:#x}", f.pc, f.module, f.symbol, f.symbol_offset,
                              f.dso_address);
        lines.push_back(std::move(line));
      },
      po);
  return lines;
}

// Unwinding on the calling thread and naming on a second gives the stacks one thread gives, in
// the same order: kernel and user samples, a kernel thread's, and thousands of samples across
// many batches.
TEST(StackPipeline, TwoThreadsGiveWhatOneGives) {
  const TestAttr a = dwarf_attr();
  const std::vector<std::vector<uint8_t>> records = many_samples(a, 256, false);
  for (const Built& b : {recording(false), recording(true), pipe_layout({a}, records, {})}) {
    const std::vector<std::string> one = stacks_of(b, 1), two = stacks_of(b, 2);
    ASSERT_FALSE(one.empty());
    EXPECT_EQ(one, two);
  }
  EXPECT_EQ(stacks_of(pipe_layout({a}, records, {}), 2).size(), 3003u);
}

} // namespace
} // namespace ehelf::perf
