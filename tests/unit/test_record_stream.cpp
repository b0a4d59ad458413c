// RecordStream: the records of a perf.data in perf's order (a round at a time, sorted within it),
// damage ending the stream after the records before it, memory bounded by the reordering window
// on recordings without rounds. The recordings are built in memory (perf_recording.hpp).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <tuple>

#include "perf/record_stream.hpp"
#include "perf_recording.hpp"
#include "test_support.hpp"

namespace ehelf::perf {
namespace {

// perf's order: records queue until a FINISHED_ROUND says every ring buffer was read past the
// latest time of the round before it; those no later come out sorted. A record that arrives
// after its time was passed comes late, as perf delivers it, rather than where a sort of the
// whole recording would put it.
TEST(RecordStream, ReleasesWhatARoundMakesSafe) {
  const TestAttr a = dwarf_attr();
  auto at = [&](uint64_t time) { return comm(a, 1, 1, "c", false, {1, 1, time, 101}); };
  const Built b = pipe_layout({a},
                              {at(20), at(10), finished_round(), at(15), at(30), finished_round(),
                               at(25), at(12), at(0) /* no time: the one before it */},
                              recording_features({a}));
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d) << d.error().to_string();
  RecordStream records(*d);
  std::vector<uint64_t> times, offsets;
  while (const Record* r = records.next()) {
    times.push_back(r->time);
    offsets.push_back(r->offset);
  }
  EXPECT_FALSE(records.damage());
  EXPECT_EQ(times, (std::vector<uint64_t>{10, 15, 20, 12, 0, 25, 30}));
  // The timeless record keeps its place after the record whose time it takes.
  ASSERT_EQ(offsets.size(), 7u);
  EXPECT_EQ(offsets[4], b.record_offsets[8]);
  // A recording without rounds comes out as a whole sort.
  const Built unrounded =
      pipe_layout({a}, {at(20), at(10), at(15), at(30), at(25), at(12)}, recording_features({a}));
  auto u = PerfData::from_bytes(unrounded.bytes, kName);
  ASSERT_TRUE(u);
  RecordStream all(*u);
  times.clear();
  while (const Record* r = all.next())
    times.push_back(r->time);
  EXPECT_EQ(times, (std::vector<uint64_t>{10, 12, 15, 20, 25, 30}));
}

// A malformed record ends the stream as damage: the records before it come out (ordered).
TEST(RecordStream, DamageEndsItAfterTheRecordsBefore) {
  const TestAttr a = dwarf_attr();
  auto at = [&](uint64_t time) { return comm(a, 1, 1, "c", false, {1, 1, time, 101}); };
  Built b = pipe_layout({a}, {at(20), at(10), at(5)}, recording_features({a}));
  put_u16(b.bytes, b.record_offsets[2] + 6, 4); // a record size below its header's
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d);
  RecordStream records(*d);
  std::vector<uint64_t> times;
  while (const Record* r = records.next())
    times.push_back(r->time);
  EXPECT_EQ(times, (std::vector<uint64_t>{10, 20}));
  ASSERT_TRUE(records.damage());
  EXPECT_NE(records.damage()->to_string().find(fmt::format("offset {:#x}", b.record_offsets[2])),
            std::string::npos)
      << records.damage()->to_string();
  EXPECT_EQ(records.next(), nullptr);
}

// The resident memory a RecordStream over `bytes` grows by (the stream's peak less where it
// started), with the records it gives and whether their times (where they have one) never go back;
// in a child process, so that the peak is this reading's. `pipe`: read with read_stream from a
// descriptor, as from `perf record -o -`.
struct StreamCost {
  uint64_t grown_kb = 0, records = 0;
  bool in_order = false;
};
StreamCost stream_cost(const std::vector<uint8_t>& bytes, bool pipe) {
  auto status_kb = [](const char* field) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field)));
    return 0ull;
  };
  test::TempDir dir;
  const std::string path = (dir.path / "data").string();
  test::write_file(path, bytes);
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::ofstream("/proc/self/clear_refs") << "5"; // the peak starts from here
    const uint64_t start = status_kb("VmRSS:");
    StreamCost c;
    {
      auto d = pipe ? PerfData::read_stream(::open(path.c_str(), O_RDONLY), kName)
                    : PerfData::open(path);
      if (!d) ::_exit(1);
      RecordStream records(*d);
      uint64_t last = 0;
      c.in_order = true;
      while (const Record* r = records.next()) {
        ++c.records;
        if (!r->time) continue; // a record without a time (it queued with the one before it)
        c.in_order = c.in_order && r->time >= last;
        last = r->time;
      }
      if (records.damage()) ::_exit(2);
    }
    c.grown_kb = status_kb("VmHWM:") - start;
    const bool sent = ::write(fds[1], &c, sizeof c) == static_cast<ssize_t>(sizeof c);
    ::_exit(sent ? 0 : 3);
  }
  ::close(fds[1]);
  StreamCost c;
  const bool got = ::read(fds[0], &c, sizeof c) == static_cast<ssize_t>(sizeof c);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(got && WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  return c;
}

// Recordings without FINISHED_ROUND hold their records no longer than the reordering window:
// 4 MiB of small records in one compressed record of a few hundred bytes, four such, 16 MiB of
// plain records from a file and from a descriptor (before the window: 0.6 to 1.1 GB each). All
// records come out, in time order.
TEST(RecordStream, MemoryIsBoundedWithoutRounds) {
  // The window's bound, with room for the allocator: 128 MB (before it, 0.3-0.9 GB); twice that
  // under AddressSanitizer, whose redzones and quarantine double what the heap holds.
#if defined(__SANITIZE_ADDRESS__)
  constexpr uint64_t kBoundKb = 256u << 10;
#else
  constexpr uint64_t kBoundKb = 128u << 10;
#endif
  const TestAttr a = dwarf_attr();
  // A comm record (48 bytes, with a time) and 15 header-only records of a type perf writes
  // outside the kernel's (PERF_RECORD_TIME_CONV, 8 bytes, taking the comm's time): ~10 bytes a
  // record, where a Record takes 192.
  auto records_of = [&](uint64_t bytes, uint64_t time) {
    std::vector<std::vector<uint8_t>> rs;
    for (uint64_t size = 0; size < bytes;) {
      rs.push_back(comm(a, 1, 1, "c", false, {1, 1, time, 101}));
      size += rs.back().size();
      for (int i = 0; i < 15; ++i, size += 8)
        rs.push_back(record(79, 0, {}));
    }
    return rs;
  };
  std::vector<std::vector<uint8_t>> chunked;
  uint64_t chunked_records = 0;
  for (uint64_t chunk = 0; chunk < 4; ++chunk) {
    const auto plain = records_of(4u << 20, 1000 + chunk);
    chunked_records += plain.size();
    auto z = compressed_records(plain, {});
    ASSERT_EQ(z.size(), 1u);
    ASSERT_LT(z[0].size(), 4096u);
    chunked.push_back(z[0]);
    if (chunk == 0) {
      const Built first = file_layout({a}, chunked, {});
      const StreamCost c = stream_cost(first.bytes, false);
      EXPECT_EQ(c.records, plain.size());
      EXPECT_TRUE(c.in_order);
      EXPECT_LT(c.grown_kb, kBoundKb) << "one compressed record of 4 MiB of records";
      std::printf("one compressed record (%zu bytes): %llu records, resident memory grew by %llu "
                  "KB\n",
                  first.bytes.size(), static_cast<unsigned long long>(c.records),
                  static_cast<unsigned long long>(c.grown_kb));
    }
  }
  const Built four = file_layout({a}, chunked, {});
  std::vector<std::vector<uint8_t>> plain;
  for (uint64_t i = 0; i < 4; ++i) {
    auto part = records_of(4u << 20, 2000 + i);
    plain.insert(plain.end(), part.begin(), part.end());
  }
  const Built big = file_layout({a}, plain, {});
  for (const auto& [what, b, count, pipe] :
       {std::tuple{"four compressed records", &four, chunked_records, false},
        std::tuple{"16 MiB of records", &big, uint64_t(plain.size()), false},
        std::tuple{"16 MiB of records from a descriptor", &big, uint64_t(plain.size()), true}}) {
    SCOPED_TRACE(what);
    const StreamCost c = stream_cost(b->bytes, pipe);
    EXPECT_EQ(c.records, count);
    EXPECT_TRUE(c.in_order);
    EXPECT_LT(c.grown_kb, kBoundKb);
    std::printf("%s (%zu bytes): %llu records, resident memory grew by %llu KB\n", what,
                b->bytes.size(), static_cast<unsigned long long>(c.records),
                static_cast<unsigned long long>(c.grown_kb));
  }
}

} // namespace
} // namespace ehelf::perf
