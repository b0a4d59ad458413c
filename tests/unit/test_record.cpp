// The parts of `ehelf record` that run without perf events: the ring buffer reader (records in
// order, a record wrapping around the end handed out whole, hostile sizes) and the output format
// chosen from flags and file names. The whole command runs on real processes in
// tests/scripts/test_record.sh.
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <vector>

#include "record/output.hpp"
#include "record/ring_buffer.hpp"
#include "test_support.hpp"

namespace ehelf::record {
namespace {

// A ring of `size` bytes holding `records` from offset `start` on (wrapping around its end).
struct TestRing {
  std::vector<uint8_t> data;
  perf_event_mmap_page meta{};
  TestRing(size_t size, uint64_t start, const std::vector<std::vector<uint8_t>>& records)
      : data(size) {
    meta.data_tail = start;
    uint64_t pos = start;
    for (const auto& r : records)
      for (uint8_t b : r)
        data[pos++ % size] = b;
    meta.data_head = pos;
  }
};

std::vector<uint8_t> record_of(uint32_t type, size_t size, uint8_t fill) {
  std::vector<uint8_t> r(size, fill);
  const uint16_t s = static_cast<uint16_t>(size);
  std::memcpy(r.data(), &type, 4);
  std::memset(r.data() + 4, 0, 2);
  std::memcpy(r.data() + 6, &s, 2);
  return r;
}

TEST(RingBuffer, HandsOutRecordsInOrderAndAWrappedOneWhole) {
  const auto a = record_of(9, 40, 0xaa), b = record_of(3, 48, 0xbb), c = record_of(9, 24, 0xcc);
  TestRing t(128, 64, {a, b, c}); // b runs from 104 over the end to 24
  RingBuffer ring = RingBuffer::view(&t.meta, t.data.data(), t.data.size());
  auto records = ring.pending();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(std::vector<uint8_t>(records[0].begin(), records[0].end()), a);
  EXPECT_EQ(std::vector<uint8_t>(records[1].begin(), records[1].end()), b);
  EXPECT_EQ(std::vector<uint8_t>(records[2].begin(), records[2].end()), c);
  // In place when whole: the first and last point into the ring, the wrapped one is a copy.
  EXPECT_EQ(records[0].data(), t.data.data() + 64);
  EXPECT_EQ(records[2].data(), t.data.data() + 24);
  EXPECT_EQ(t.meta.data_tail, 64u); // not given back before release()
  ring.release();
  EXPECT_EQ(t.meta.data_tail, t.meta.data_head);
  EXPECT_TRUE(ring.pending().empty());
  EXPECT_EQ(ring.corrupt_bytes(), 0u);
}

TEST(RingBuffer, RecordsNotGivenBackArePendingAgain) {
  // The recorder gives back the records it took and leaves those timed after what it knows to
  // be read in order (a record on its way into another ring): they come again, the wrapped one
  // too, and the tail stops at the first of them.
  const auto a = record_of(9, 40, 0xaa), b = record_of(3, 48, 0xbb), c = record_of(9, 24, 0xcc);
  TestRing t(128, 64, {a, b, c}); // b wraps
  RingBuffer ring = RingBuffer::view(&t.meta, t.data.data(), t.data.size());
  ASSERT_EQ(ring.pending().size(), 3u);
  ring.release(1);
  EXPECT_EQ(t.meta.data_tail, 104u);
  auto again = ring.pending();
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(std::vector<uint8_t>(again[0].begin(), again[0].end()), b);
  EXPECT_EQ(std::vector<uint8_t>(again[1].begin(), again[1].end()), c);
  ring.release(0);
  EXPECT_EQ(t.meta.data_tail, 104u);
  ring.release(); // (nothing pending: the tail stays)
  EXPECT_EQ(t.meta.data_tail, 104u);
  ASSERT_EQ(ring.pending().size(), 2u);
  ring.release(2);
  EXPECT_EQ(t.meta.data_tail, t.meta.data_head);
  EXPECT_TRUE(ring.pending().empty());
  EXPECT_EQ(ring.corrupt_bytes(), 0u);
}

TEST(RingBuffer, ARecordSizeThatCannotBeIsCountedAndSkipped) {
  auto a = record_of(9, 32, 1), bad = record_of(9, 16, 2);
  const uint16_t huge = 4000; // runs past the head
  std::memcpy(bad.data() + 6, &huge, 2);
  TestRing t(256, 0, {a, bad});
  RingBuffer ring = RingBuffer::view(&t.meta, t.data.data(), t.data.size());
  auto records = ring.pending();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(ring.corrupt_bytes(), 16u);
  ring.release();
  EXPECT_EQ(t.meta.data_tail, t.meta.data_head);

  auto zero = record_of(9, 8, 0);
  std::memset(zero.data() + 6, 0, 2); // size 0 would never advance
  TestRing z(64, 0, {zero});
  RingBuffer ring2 = RingBuffer::view(&z.meta, z.data.data(), z.data.size());
  EXPECT_TRUE(ring2.pending().empty());
  EXPECT_EQ(ring2.corrupt_bytes(), 8u);
}

TEST(RingBuffer, ATailTheKernelNeverLeavesFramesNothing) {
  // Unaligned (a header would run over the ring's end), or past the head: both seen by the fuzzer.
  auto a = record_of(9, 32, 1);
  TestRing t(64, 0, {a, a});
  t.meta.data_tail = 60;
  RingBuffer ring = RingBuffer::view(&t.meta, t.data.data(), t.data.size());
  EXPECT_TRUE(ring.pending().empty());
  EXPECT_EQ(ring.corrupt_bytes(), 4u);
  ring.release();
  EXPECT_EQ(t.meta.data_tail, t.meta.data_head);

  TestRing p(64, 0, {a});
  p.meta.data_tail = 40; // past the head (32)
  RingBuffer ring2 = RingBuffer::view(&p.meta, p.data.data(), p.data.size());
  EXPECT_TRUE(ring2.pending().empty());
  ring2.release();
  EXPECT_EQ(p.meta.data_tail, p.meta.data_head);
}

TEST(Output, FormatFromFlagOrExtension) {
  EXPECT_EQ(EHELF_OK(profile_format("", "x.svg")), ProfileFormat::Svg);
  EXPECT_EQ(EHELF_OK(profile_format("", "x.pb.gz")), ProfileFormat::Pprof);
  EXPECT_EQ(EHELF_OK(profile_format("", "x.pprof")), ProfileFormat::Pprof);
  EXPECT_EQ(EHELF_OK(profile_format("", "x.folded")), ProfileFormat::Folded);
  EXPECT_EQ(EHELF_OK(profile_format("", "x.txt")), ProfileFormat::Folded);
  EXPECT_EQ(EHELF_OK(profile_format("script", "x.txt")), ProfileFormat::Script);
  EXPECT_EQ(EHELF_OK(profile_format("svg", "x.folded")), ProfileFormat::Svg);
  EXPECT_FALSE(profile_format("bogus", "x.svg"));
  // In any case; the file's extension, not a directory's.
  EXPECT_EQ(EHELF_OK(profile_format("", "x.SVG")), ProfileFormat::Svg);
  EXPECT_EQ(EHELF_OK(profile_format("", "out/PROF.PB.GZ")), ProfileFormat::Pprof);
  EXPECT_EQ(EHELF_OK(profile_format("", "x.Folded")), ProfileFormat::Folded);
  // An extension no format has is refused, naming the file, unless -f says the format.
  for (const char* path : {"prof.json", "x.html", "x.svgz", "x", "graphs.svg/x", "x.svg.bak"}) {
    auto format = profile_format("", path);
    ASSERT_FALSE(format) << path;
    EXPECT_NE(format.error().message.find(path), std::string::npos) << format.error().message;
  }
  EXPECT_EQ(EHELF_OK(profile_format("folded", "prof.json")), ProfileFormat::Folded);
}

} // namespace
} // namespace ehelf::record
