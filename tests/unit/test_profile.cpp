// record::Profile: each distinct stack counted once; over a recording (ehelf perf -f folded),
// stacks named on a second thread as they are first seen count what one thread counts. The
// recordings are built in memory (perf_recording.hpp).
#include <gtest/gtest.h>

#include <map>

#include "perf/record_stream.hpp"
#include "perf/sample_unwinder.hpp"
#include "perf_recording.hpp"
#include "record/profile.hpp"
#include "test_support.hpp"

namespace ehelf::perf {
namespace {

// ehelf perf -f folded -j 2: each distinct stack named on a second thread as it is first seen
// (Profile::add_recording_summarized) gives the stacks and counts that one thread gives
// (add_recording, then for_each_named), samples without a stack copy included (handed to `other`
// on the second thread).
TEST(Profile, SummarizedOnTwoThreadsGivesWhatOneGives) {
  const TestAttr a = dwarf_attr();
  const std::vector<std::vector<uint8_t>> records = many_samples(a, 13, true);
  auto line = [](const SampleStack& s) {
    std::string l = fmt::format("{} {}/{} [{}] {}:", s.comm, s.pid, s.tid, s.stop, s.frames.size());
    for (const StackFrame& f : s.frames)
      l += fmt::format(" {:#x} {} {}+{:#x}", f.pc, f.module, f.symbol, f.symbol_offset);
    return l;
  };
  // Stack line -> samples, by add_recording (one thread) or add_recording_summarized (two).
  auto fold = [&](const Built& b, bool two_threads) {
    std::map<std::string, uint64_t> out;
    auto d = PerfData::from_bytes(b.bytes, kName);
    EXPECT_TRUE(d);
    if (!d) return out;
    SampleUnwinderOptions options;
    options.symbols = false;
    SampleUnwinder unwinder(*d, options);
    RecordStream stream(*d);
    ehelf::record::Profile profile;
    auto other = [&](const SampleStack& s) { ++out[line(s)]; };
    if (two_threads) {
      profile.add_recording_summarized(stream, unwinder, line, other);
      profile.for_each_summary(
          [&](const std::string& l, uint64_t samples, uint64_t) { out[l] += samples; });
    } else {
      profile.add_recording(stream, unwinder, other);
      profile.for_each_named(unwinder,
                             [&](const CountedStack& c) { out[line(c.stack)] += c.samples; });
    }
    return out;
  };
  for (const Built& b : {recording(false), pipe_layout({a}, records, {})}) {
    const std::map<std::string, uint64_t> one = fold(b, false), two = fold(b, true);
    ASSERT_FALSE(one.empty());
    EXPECT_EQ(one, two);
    if (b.bytes.size() > 100000) {
      EXPECT_GT(one.size(), 20u); // the 3,000 samples' many stacks
    }
  }
}

} // namespace
} // namespace ehelf::perf

namespace ehelf::record {
namespace {

TEST(Profile, CountsEachDistinctStackOnce) {
  Profile p;
  perf::SampleUnwinder u(perf::RecordingInfo{}, {});
  perf::RawStack s;
  s.pid = 10;
  s.tid = 11;
  s.user = {0x1000, 0x2000};
  s.user_walked = true;
  s.stop = StopReason::EndOfStack;
  s.period = 5;
  p.add(s, "prog", u);
  p.add(s, "prog", u);
  s.tid = 12; // another thread: another stack
  p.add(s, "prog", u);
  s.stop = StopReason::BadRead;
  s.user = {0x1000};
  p.add(s, "prog", u);
  p.add(s, "renamed", u); // its command name changed: counted apart
  EXPECT_EQ(p.samples(), 5u);
  EXPECT_EQ(p.distinct_stacks(), 4u);
  EXPECT_EQ(p.threads(), 2u);
  ASSERT_EQ(p.stopped_early().size(), 1u);
  EXPECT_EQ(p.stopped_early().begin()->second, 2u);
}

} // namespace
} // namespace ehelf::record
