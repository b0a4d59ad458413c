// The checks the tests of the perf.data reader share (test_perf_data.cpp: valid files;
// test_perf_data_hostile.cpp: hostile ones; test_sample_unwinder.cpp: the unwinder over a
// decoded recording): a parse that must survive whatever it is given, the same records read
// whole and as a stream, one-line errors naming the file and an offset.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "perf/perf_data.hpp"
#include "perf/record_stream.hpp"
#include "perf/sample_unwinder.hpp"
#include "perf/stack_pipeline.hpp"
#include "perf_recording.hpp"
#include "record/profile.hpp"
#include "test_support.hpp"

namespace ehelf::perf {
namespace {

// The records sorted by time, stably, over the whole recording (records without a time take the
// one of the record before them): what RecordStream gives on a recording in order.
inline std::vector<const Record*> sorted_by_time(const std::vector<Record>& records) {
  std::vector<std::pair<uint64_t, const Record*>> keyed;
  uint64_t last = 0;
  for (const Record& r : records) {
    if (r.time) last = r.time;
    keyed.emplace_back(last, &r);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const Record*> sorted;
  for (const auto& k : keyed)
    sorted.push_back(k.second);
  return sorted;
}

// ---------------------------------------------------------------------------------------------
// Checks.

// The error is one line, names the file and an offset.
inline ::testing::AssertionResult good_error(const Error& e) {
  const std::string s = e.to_string();
  if (s.find('\n') != std::string::npos)
    return ::testing::AssertionFailure() << "error on several lines: " << s;
  if (s.rfind(std::string(kName) + ": offset 0x", 0) != 0 || !e.has_offset)
    return ::testing::AssertionFailure() << "error without file name and offset: " << s;
  if (e.message.empty()) return ::testing::AssertionFailure() << "empty message: " << s;
  return ::testing::AssertionSuccess();
}

struct Outcome {
  bool parsed = false, decoded = false;
  std::string error;
  std::string damage; // the header's damage note (a truncated or unfinished recording)
  size_t records = 0, samples = 0;
};

// Parses `bytes` (exactly that many bytes on the heap, so that ASan sees any read past them),
// checks that every span and name a record holds is inside them, reads each of their bytes, and
// feeds every record to a SampleUnwinder.
// `compressed`: the input has compressed records, whose records point into data the reader
// decompressed (not checked against the input's bounds; their bytes are still all read).
inline Outcome survive(std::span<const uint8_t> input, bool compressed = false) {
  Outcome o;
  std::vector<uint8_t> bytes(input.begin(), input.end());
  const uint8_t* lo = bytes.data();
  const uint8_t* hi = bytes.data() + bytes.size();
  auto data = PerfData::from_bytes(std::move(bytes), kName);
  if (!data) {
    EXPECT_TRUE(good_error(data.error()));
    o.error = data.error().to_string();
    return o;
  }
  o.parsed = true;
  if (const auto& d = data->header_damage()) {
    EXPECT_TRUE(good_error(*d));
    o.damage = d->to_string();
  }
  auto records = data->records();
  if (!records) {
    EXPECT_TRUE(good_error(records.error()));
    o.error = records.error().to_string();
    return o;
  }
  o.decoded = true;
  o.records = records->size();
  auto inside = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    return n == 0 || (b >= lo && b <= hi && n <= size_t(hi - b));
  };
  uint64_t sum = 0; // every byte is read: ASan checks them
  auto touch = [&](std::span<const uint8_t> s) {
    if (!compressed) {
      EXPECT_TRUE(inside(s.data(), s.size()));
    }
    for (uint8_t c : s)
      sum += c;
  };
  auto touch_sv = [&](std::string_view s) {
    touch({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  };
  for (const Record& r : *records) {
    if (!compressed) {
      EXPECT_GE(r.offset, 16u);
      EXPECT_LT(r.offset, size_t(hi - lo));
    }
    if (const auto* s = std::get_if<SampleRecord>(&r.body)) {
      ++o.samples;
      EXPECT_NE(s->attr, nullptr);
      touch(s->callchain);
      touch(s->regs);
      touch(s->stack);
      touch(s->stack_data());
      EXPECT_LE(s->stack_data().size(), s->stack.size());
      for (size_t i = 0; i < s->callchain_size(); ++i)
        sum += s->callchain_at(i);
      for (unsigned reg = 0; reg < 70; ++reg) {
        uint64_t v = 0;
        if (s->reg(reg, v)) sum += v;
      }
    } else if (const auto* m = std::get_if<MmapRecord>(&r.body)) {
      touch(m->build_id);
      touch_sv(m->filename);
      EXPECT_LE(m->build_id.size(), 20u);
    } else if (const auto* c = std::get_if<CommRecord>(&r.body)) {
      touch_sv(c->comm);
    }
  }
  (void)sum;
  SampleUnwinderOptions options;
  options.symbols = false;
  options.max_depth = 64;
  SampleUnwinder unwinder(*data, options);
  SampleStack stack;
  for (const Record* r : sorted_by_time(*records))
    unwinder.feed(*r, stack);
  EXPECT_EQ(unwinder.stats().samples, o.samples);
  // The same records as ehelf perf -j 2 takes them: unwound on this thread, named on another.
  SampleUnwinder two(*data, options);
  RecordStream stream(*data);
  StackPipelineOptions threads;
  threads.threads = 2;
  size_t named = 0;
  for_each_stack(
      stream, two, [&](const SampleStack&) { ++named; }, threads);
  EXPECT_EQ(named, o.samples);
  // And as ehelf perf -f folded -j 2 takes them: distinct stacks named on another thread.
  SampleUnwinder folding(*data, options);
  RecordStream again(*data);
  ehelf::record::Profile profile;
  uint64_t counted = 0;
  profile.add_recording_summarized(
      again, folding, [](const SampleStack& s) { return s.comm; },
      [&](const SampleStack&) { ++counted; });
  profile.for_each_summary([&](const std::string&, uint64_t n, uint64_t) { counted += n; });
  EXPECT_EQ(counted, o.samples);
  return o;
}

inline Outcome survive(const Built& b) {
  return survive(b.bytes);
}

// A recording read as `perf record -o - | ehelf perf` reads it: its bytes sent through a socket
// in pieces of irregular sizes (`seed` picks them), read back with PerfData::read_stream and
// RecordStream while they come. Every byte of every record is read (ASan checks them).
struct Streamed {
  std::unique_ptr<PerfData> data; // what the records' attributes point into
  std::string error;              // read_stream's
  std::vector<Record> records;    // in RecordStream's order
  std::string damage;             // what ended the records early
};

inline Streamed stream(std::span<const uint8_t> bytes, unsigned seed = 1) {
  Streamed out;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    ADD_FAILURE() << "socketpair";
    return out;
  }
  std::thread writer([bytes, seed, fd = fds[1]] {
    std::minstd_rand pieces(seed);
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::min<size_t>(bytes.size() - at, 1 + pieces() % 9000);
      const ssize_t sent = ::send(fd, bytes.data() + at, n, MSG_NOSIGNAL);
      if (sent <= 0) break; // the reader stopped
      at += static_cast<size_t>(sent);
    }
    ::close(fd);
  });
  if (auto d = PerfData::read_stream(fds[0], kName); !d) {
    EXPECT_TRUE(good_error(d.error()));
    out.error = d.error().to_string();
  } else {
    out.data = std::make_unique<PerfData>(std::move(*d));
    RecordStream records(*out.data);
    uint64_t sum = 0;
    auto touch = [&](std::span<const uint8_t> b) {
      for (uint8_t c : b)
        sum += c;
    };
    while (const Record* r = records.next()) {
      if (const auto* smp = std::get_if<SampleRecord>(&r->body)) {
        touch(smp->callchain);
        touch(smp->regs);
        touch(smp->stack);
      } else if (const auto* m = std::get_if<MmapRecord>(&r->body)) {
        touch({reinterpret_cast<const uint8_t*>(m->filename.data()), m->filename.size()});
      }
      out.records.push_back(*r);
    }
    (void)sum;
    if (records.damage()) {
      EXPECT_TRUE(good_error(*records.damage()));
      out.damage = records.damage()->to_string();
    }
  }
  ::close(fds[0]); // a writer still sending gets an error
  writer.join();
  return out;
}

// What a stream of `b` gives is what reading it whole and sorting its records gives.
inline void expect_stream_as_whole(const Built& b) {
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d) << d.error().to_string();
  auto all = d->records();
  ASSERT_TRUE(all) << all.error().to_string();
  const std::vector<const Record*> sorted = sorted_by_time(*all);
  for (unsigned seed : {1u, 2u, 3u}) {
    Streamed st = stream(b.bytes, seed);
    ASSERT_EQ(st.error, "");
    EXPECT_EQ(st.damage, "");
    // (FINISHED_ROUND records are the stream's own: it does not give them.)
    std::vector<const Record*> expected;
    for (const Record* r : sorted)
      if (r->type != record_type::kFinishedRound) expected.push_back(r);
    ASSERT_EQ(st.records.size(), expected.size()) << seed;
    for (size_t i = 0; i < expected.size(); ++i) {
      const Record &a = *expected[i], &s = st.records[i];
      EXPECT_EQ(s.type, a.type) << i;
      EXPECT_EQ(s.offset, a.offset) << i;
      EXPECT_EQ(s.time, a.time) << i;
      EXPECT_EQ(s.body.index(), a.body.index()) << i;
      if (const auto* x = std::get_if<SampleRecord>(&a.body)) {
        const auto& y = std::get<SampleRecord>(s.body);
        EXPECT_EQ(y.ip, x->ip);
        EXPECT_TRUE(std::ranges::equal(y.stack, x->stack)) << i;
        EXPECT_TRUE(std::ranges::equal(y.regs, x->regs)) << i;
      }
    }
  }
}

// An error at `offset` whose message has `words`.
inline void expect_error(std::span<const uint8_t> bytes, uint64_t offset, std::string_view words) {
  Outcome o = survive(bytes);
  ASSERT_FALSE(o.decoded) << "no error; expected one at " << offset << " with " << words;
  EXPECT_NE(o.error.find(fmt::format("offset {:#x}: ", offset)), std::string::npos) << o.error;
  EXPECT_NE(o.error.find(words), std::string::npos) << o.error;
}

// No error, but damage at `offset` whose note has `words`: the data is read up to it, and the
// records before it are all there.
inline void expect_damage(std::span<const uint8_t> bytes, uint64_t offset, std::string_view words) {
  Outcome o = survive(bytes);
  ASSERT_TRUE(o.parsed) << o.error;
  EXPECT_NE(o.damage.find(fmt::format("offset {:#x}: ", offset)), std::string::npos) << o.damage;
  EXPECT_NE(o.damage.find(words), std::string::npos) << o.damage;
  auto data = PerfData::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), kName);
  ASSERT_TRUE(data);
  std::optional<Error> damage;
  auto records = data->records(&damage);
  ASSERT_TRUE(records);
  if (damage) {
    EXPECT_TRUE(good_error(*damage));
  }
}

inline std::vector<uint8_t> with_u16(std::vector<uint8_t> b, size_t at, uint16_t v) {
  put_u16(b, at, v);
  return b;
}
inline std::vector<uint8_t> with_u32(std::vector<uint8_t> b, size_t at, uint32_t v) {
  put_u32(b, at, v);
  return b;
}
inline std::vector<uint8_t> with_u64(std::vector<uint8_t> b, size_t at, uint64_t v) {
  put_u64(b, at, v);
  return b;
}

inline std::vector<Built> valid_inputs() {
  return {recording(false), recording(true), two_event_recording(true, false),
          two_event_recording(true, true), two_event_recording(false, false)};
}

} // namespace
} // namespace ehelf::perf
