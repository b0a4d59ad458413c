// PerfData (the perf.data reader) and SampleUnwinder fed with what it decodes. perf.data bytes are
// built from scratch (perf_recording.hpp), in the file and the pipe layout. The valid files check
// that every decoded field is the one written; the hostile ones (every truncation, byte
// overwrites at every position, lengths and counts out of range) check that the reader either
// succeeds or fails with a one-line error naming the file and an offset, that every span it
// returns lies inside the given bytes, and that the unwinder survives whatever a successful parse
// returns.
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
std::vector<const Record*> sorted_by_time(const std::vector<Record>& records) {
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
::testing::AssertionResult good_error(const Error& e) {
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
Outcome survive(std::span<const uint8_t> input, bool compressed = false) {
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

Outcome survive(const Built& b) {
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

Streamed stream(std::span<const uint8_t> bytes, unsigned seed = 1) {
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
void expect_stream_as_whole(const Built& b) {
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
void expect_error(std::span<const uint8_t> bytes, uint64_t offset, std::string_view words) {
  Outcome o = survive(bytes);
  ASSERT_FALSE(o.decoded) << "no error; expected one at " << offset << " with " << words;
  EXPECT_NE(o.error.find(fmt::format("offset {:#x}: ", offset)), std::string::npos) << o.error;
  EXPECT_NE(o.error.find(words), std::string::npos) << o.error;
}

// No error, but damage at `offset` whose note has `words`: the data is read up to it, and the
// records before it are all there.
void expect_damage(std::span<const uint8_t> bytes, uint64_t offset, std::string_view words) {
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

std::vector<uint8_t> with_u16(std::vector<uint8_t> b, size_t at, uint16_t v) {
  put_u16(b, at, v);
  return b;
}
std::vector<uint8_t> with_u32(std::vector<uint8_t> b, size_t at, uint32_t v) {
  put_u32(b, at, v);
  return b;
}
std::vector<uint8_t> with_u64(std::vector<uint8_t> b, size_t at, uint64_t v) {
  put_u64(b, at, v);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Valid files: every field.

void check_recording(const PerfData& d, const Built& b, bool pipe) {
  EXPECT_EQ(d.pipe_mode(), pipe);
  EXPECT_EQ(d.name(), kName);
  ASSERT_EQ(d.attrs().size(), 1u);
  const EventAttr& a = d.attrs()[0];
  EXPECT_EQ(a.type, 1u);
  EXPECT_EQ(a.config, 0u);
  EXPECT_EQ(a.sample_period, 4000u);
  EXPECT_EQ(a.sample_type, kDwarfSampleType);
  EXPECT_TRUE(a.sample_id_all());
  EXPECT_TRUE(a.freq());
  EXPECT_EQ(a.sample_regs_user, kRegsMask);
  EXPECT_EQ(a.sample_stack_user, 64u);
  EXPECT_EQ(a.ids, std::vector<uint64_t>{101});
  EXPECT_EQ(a.name, pipe ? "" : "cpu-clock"); // the event description is a file feature
  EXPECT_EQ(d.hostname(), "testhost");
  EXPECT_EQ(d.os_release(), "6.1.0-test");
  EXPECT_EQ(d.arch(), "x86_64");
  ASSERT_EQ(d.build_ids().size(), 3u);
  EXPECT_EQ(d.build_ids()[0].pid, 100u);
  EXPECT_FALSE(d.build_ids()[0].kernel);
  EXPECT_EQ(d.build_ids()[0].build_id, kBuildIdProg);
  EXPECT_EQ(d.build_ids()[0].filename, "/nonexistent/ehelf-test/prog");
  EXPECT_EQ(d.build_ids()[1].build_id, kBuildIdLib); // its size byte says 16
  EXPECT_EQ(d.build_ids()[1].filename, "/nonexistent/ehelf-test/libx.so");
  EXPECT_TRUE(d.build_ids()[2].kernel);
  EXPECT_EQ(d.build_ids()[2].pid, static_cast<uint32_t>(-1));
  EXPECT_EQ(d.build_ids()[2].filename, "[kernel.kallsyms]");
  EXPECT_EQ(d.attr_for_id(101), &a);
  EXPECT_EQ(d.attr_for_id(999), &a); // the only one

  auto records = d.records();
  ASSERT_TRUE(records) << records.error().to_string();
  const std::vector<Record>& r = *records;
  ASSERT_EQ(r.size(), 13u);
  ASSERT_EQ(b.record_offsets.size(), r.size());
  for (size_t i = 0; i < r.size(); ++i)
    EXPECT_EQ(r[i].offset, b.record_offsets[i]) << i;
  const uint32_t types[] = {3, 10, 10, 10, 7, 3, 9, 9, 2, 68, 9, 4, 1};
  for (size_t i = 0; i < std::size(types); ++i)
    EXPECT_EQ(r[i].type, types[i]) << i;
  const uint64_t times[] = {1000, 1001, 1002, 1003, 1004, 1005, 2000,
                            2001, 2002, 0,    2003, 3000, 3001};
  for (size_t i = 0; i < std::size(times); ++i)
    EXPECT_EQ(r[i].time, times[i]) << i;

  const auto& c0 = std::get<CommRecord>(r[0].body);
  EXPECT_EQ(c0.pid, 100u);
  EXPECT_EQ(c0.tid, 100u);
  EXPECT_EQ(c0.comm, "prog");
  EXPECT_TRUE(c0.exec);
  const auto& c5 = std::get<CommRecord>(r[5].body);
  EXPECT_EQ(c5.tid, 102u);
  EXPECT_EQ(c5.comm, "worker");
  EXPECT_FALSE(c5.exec);

  const auto& m1 = std::get<MmapRecord>(r[1].body);
  EXPECT_TRUE(m1.mmap2);
  EXPECT_EQ(m1.pid, 100u);
  EXPECT_EQ(m1.start, kProgStart);
  EXPECT_EQ(m1.len, 0x2000u);
  EXPECT_EQ(m1.pgoff, kProgPgoff);
  EXPECT_EQ(m1.prot, 5u);
  EXPECT_EQ(m1.flags, 2u);
  EXPECT_TRUE(m1.executable());
  EXPECT_EQ(m1.filename, "/nonexistent/ehelf-test/prog");
  EXPECT_EQ(std::vector<uint8_t>(m1.build_id.begin(), m1.build_id.end()), kBuildIdProg);
  EXPECT_EQ(r[1].cpumode(), CpuMode::User);
  const auto& m2 = std::get<MmapRecord>(r[2].body);
  EXPECT_TRUE(m2.build_id.empty());
  EXPECT_EQ(m2.start, kLibStart);
  EXPECT_EQ(m2.filename, "/nonexistent/ehelf-test/libx.so");
  const auto& m3 = std::get<MmapRecord>(r[3].body);
  EXPECT_EQ(m3.prot, 3u);
  EXPECT_FALSE(m3.executable());
  const auto& m12 = std::get<MmapRecord>(r[12].body);
  EXPECT_FALSE(m12.mmap2);
  EXPECT_TRUE(m12.executable());
  EXPECT_EQ(m12.start, 0x500000u);
  EXPECT_EQ(m12.filename, "/old");

  const auto& fork = std::get<TaskRecord>(r[4].body);
  EXPECT_EQ(fork.pid, 100u);
  EXPECT_EQ(fork.ppid, 100u);
  EXPECT_EQ(fork.tid, 102u);
  EXPECT_EQ(fork.ptid, 100u);
  EXPECT_EQ(fork.time, 1004u);
  const auto& exit = std::get<TaskRecord>(r[11].body);
  EXPECT_EQ(exit.tid, 102u);
  EXPECT_EQ(exit.time, 3000u);

  const auto& lost = std::get<LostRecord>(r[8].body);
  EXPECT_EQ(lost.id, 101u);
  EXPECT_EQ(lost.lost, 7u);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(r[9].body));

  const auto& s = std::get<SampleRecord>(r[6].body);
  EXPECT_EQ(s.attr, &a);
  EXPECT_EQ(r[6].cpumode(), CpuMode::User);
  EXPECT_EQ(s.ip, kUserIp);
  EXPECT_EQ(s.pid, 100u);
  EXPECT_EQ(s.tid, 100u);
  EXPECT_EQ(s.time, 2000u);
  EXPECT_EQ(s.period, 4000u);
  ASSERT_EQ(s.callchain_size(), 2u);
  EXPECT_EQ(s.callchain_at(0), kContextUser);
  EXPECT_EQ(s.callchain_at(1), kUserIp);
  EXPECT_EQ(s.regs_abi, 2u);
  EXPECT_EQ(s.regs_mask, kRegsMask);
  uint64_t v = 0;
  EXPECT_TRUE(s.reg(perf_reg::kBx, v));
  EXPECT_EQ(v, 0x11u);
  EXPECT_TRUE(s.reg(perf_reg::kBp, v));
  EXPECT_EQ(v, 0x22u);
  EXPECT_TRUE(s.reg(perf_reg::kSp, v));
  EXPECT_EQ(v, kUserSp);
  EXPECT_TRUE(s.reg(perf_reg::kIp, v));
  EXPECT_EQ(v, kUserIp);
  EXPECT_TRUE(s.reg(perf_reg::kR15, v));
  EXPECT_EQ(v, 0x55u);
  EXPECT_FALSE(s.reg(perf_reg::kAx, v)); // not in the mask
  EXPECT_FALSE(s.reg(64, v));
  EXPECT_FALSE(s.reg(1000, v));
  EXPECT_EQ(s.stack.size(), 64u);
  EXPECT_EQ(s.stack_dyn_size, 48u);
  const auto valid = s.stack_data();
  EXPECT_EQ(std::vector<uint8_t>(valid.begin(), valid.end()), pattern(48, 7));

  const auto& k = std::get<SampleRecord>(r[7].body);
  EXPECT_EQ(r[7].cpumode(), CpuMode::Kernel);
  EXPECT_EQ(k.tid, 102u);
  EXPECT_EQ(k.period, 3999u);
  ASSERT_EQ(k.callchain_size(), 5u);
  EXPECT_EQ(k.callchain_at(0), kContextKernel);
  EXPECT_EQ(k.callchain_at(2), kKernelIp + 0x10);
  EXPECT_EQ(k.callchain_at(4), kLibStart + 0x1234);
  EXPECT_EQ(k.stack.size(), 32u);
  EXPECT_EQ(k.stack_data().size(), 32u); // dyn_size 1000 clamped to the copy

  const auto& kt = std::get<SampleRecord>(r[10].body);
  EXPECT_EQ(kt.regs_abi, 0u);
  EXPECT_FALSE(kt.reg(perf_reg::kIp, v)); // no user registers
  EXPECT_TRUE(kt.stack.empty());
  EXPECT_TRUE(kt.stack_data().empty());
  EXPECT_EQ(kt.period, 4001u);
}

TEST(PerfData, FileLayoutDecodesEveryField) {
  Built b = recording(false);
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d) << d.error().to_string();
  check_recording(*d, b, false);
}

TEST(PerfData, PipeLayoutDecodesEveryField) {
  Built b = recording(true);
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d) << d.error().to_string();
  check_recording(*d, b, true);
}

TEST(PerfData, OpenReadsAFile) {
  Built b = recording(false);
  const std::string path = ::testing::TempDir() + "ehelf_test_perf_data.data";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.bytes.data()),
              static_cast<std::streamsize>(b.bytes.size()));
  }
  auto d = PerfData::open(path);
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_EQ(d->name(), path);
  auto records = d->records();
  ASSERT_TRUE(records);
  EXPECT_EQ(records->size(), 13u);
  // The same file cut inside its data section: the error names it and the offset.
  b.bytes.resize(b.record_offsets[7] + 12);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.bytes.data()),
              static_cast<std::streamsize>(b.bytes.size()));
  }
  // Read up to the cut, which the damage note names (file, offset, why); the records before
  // it are all there.
  auto cut = PerfData::open(path);
  ASSERT_TRUE(cut) << cut.error().to_string();
  ASSERT_TRUE(cut->header_damage());
  EXPECT_EQ(cut->header_damage()->to_string().rfind(
                fmt::format("{}: offset {:#x}: the file ends inside its data section", path,
                            b.bytes.size()),
                0),
            0u)
      << cut->header_damage()->to_string();
  std::optional<Error> damage;
  auto salvaged = cut->records(&damage);
  ASSERT_TRUE(salvaged);
  EXPECT_EQ(salvaged->size(), 7u);
  ASSERT_TRUE(damage);
  auto missing = PerfData::open(path + ".missing");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().to_string().find(path + ".missing"), std::string::npos);
  std::remove(path.c_str());
}

TEST(PerfData, OlderAttributeSizes) {
  // perf_event_attr of version 0 (64 bytes, no registers or stack fields) and a bigger one
  // from a newer perf: fields past the attribute's size read as 0, extra bytes are skipped.
  for (uint32_t size : {64u, 72u, 120u, 136u}) {
    TestAttr a = dwarf_attr();
    a.sample_type = kIp | kTid | kTime;
    a.flags = 0;
    TestSample s;
    s.ip = 0x1234;
    s.pid = 5;
    s.tid = 6;
    s.time = 77;
    Built b = file_layout({a}, {sample_record(a, kMiscUser, s)}, {}, size);
    auto d = PerfData::from_bytes(b.bytes, kName);
    ASSERT_TRUE(d) << size << ": " << d.error().to_string();
    EXPECT_EQ(d->attrs()[0].sample_type, a.sample_type);
    EXPECT_EQ(d->attrs()[0].sample_regs_user, size >= 88 ? kRegsMask : 0u);
    auto r = d->records();
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ(std::get<SampleRecord>((*r)[0].body).ip, 0x1234u);
    EXPECT_EQ((*r)[0].time, 77u);
  }
}

void check_two_events(bool identifier, bool pipe) {
  Built b = two_event_recording(identifier, pipe);
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d) << d.error().to_string();
  ASSERT_EQ(d->attrs().size(), 2u);
  const EventAttr &a = d->attrs()[0], &bb = d->attrs()[1];
  EXPECT_EQ(a.ids, (std::vector<uint64_t>{11, 12}));
  EXPECT_EQ(bb.ids, (std::vector<uint64_t>{21, 22}));
  if (!pipe) {
    EXPECT_EQ(a.name, "cpu-clock");
    EXPECT_EQ(bb.name, "cycles");
  }
  EXPECT_EQ(d->attr_for_id(12), &a);
  EXPECT_EQ(d->attr_for_id(22), &bb);
  EXPECT_EQ(d->attr_for_id(99), nullptr);
  auto r = d->records();
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_EQ(r->size(), 5u);
  // Trailers: the mmap's (cycles: tid, time, cpu, identifier) and the exit's, by their id.
  EXPECT_EQ((*r)[0].time, 500u);
  EXPECT_EQ((*r)[1].time, 501u);
  EXPECT_EQ(std::get<MmapRecord>((*r)[1].body).filename, "/nx/two");
  EXPECT_EQ((*r)[4].time, 700u);
  const auto& s1 = std::get<SampleRecord>((*r)[2].body);
  EXPECT_EQ(s1.attr, &a);
  EXPECT_EQ(s1.id, 12u);
  EXPECT_EQ(s1.time, 600u);
  EXPECT_EQ(s1.period, 10u);
  EXPECT_EQ(s1.callchain_size(), 2u);
  const auto& s2 = std::get<SampleRecord>((*r)[3].body);
  EXPECT_EQ(s2.attr, &bb);
  EXPECT_EQ(s2.id, 21u);
  EXPECT_EQ(s2.cpu, identifier ? 3u : 0u);
  EXPECT_EQ(s2.time, 601u);
  EXPECT_EQ(s2.period, 20u);
  EXPECT_EQ(s2.callchain_size(), 0u);
  uint64_t sp = 0;
  EXPECT_TRUE(s2.reg(perf_reg::kSp, sp));
  EXPECT_EQ(sp, kUserSp);
  EXPECT_EQ(s2.stack_data().size(), 16u);
  EXPECT_TRUE(survive(b).decoded);

  // A sample whose id no event has.
  std::vector<uint8_t> bad = b.bytes;
  const size_t id_at = b.record_offsets[3] + 8 + (identifier ? 0 : 24);
  put_u64(bad, id_at, 99);
  expect_error(bad, b.record_offsets[3], "sample id matches no event");
}

TEST(PerfData, TwoEventsByIdentifier) {
  check_two_events(true, false);
}
TEST(PerfData, TwoEventsByIdentifierPipe) {
  check_two_events(true, true);
}
TEST(PerfData, TwoEventsById) {
  check_two_events(false, false);
}

TEST(PerfData, SeveralEventsNeedIds) {
  TestAttr a = dwarf_attr(), b = dwarf_attr();
  Built f = file_layout({a, b}, {}, {});
  expect_error(f.bytes, 0, "cannot tell them apart");
  auto two = two_attrs(true);
  two[1].sample_type &= ~kTime; // a different id layout
  expect_error(file_layout(two, {}, {}).bytes, 0, "different sample id layouts");
  // With PERF_SAMPLE_ID, the fields after the id in a trailer must agree too (perf refuses
  // such files as well): else a trailer's id is read from another field.
  two = two_attrs(false);
  two[1].sample_type |= kCpu;
  expect_error(file_layout(two, {}, {}).bytes, 0, "different sample id layouts");
}

TEST(PerfData, OtherSampleFields) {
  // READ (a group, with ids), RAW, BRANCH_STACK, ADDR, STREAM_ID: skipped right, so that the
  // registers and stack after them are found.
  TestAttr a = dwarf_attr();
  a.sample_type = kDwarfSampleType | kAddr | kStreamId | kCpu | kRead | kRaw | kBranchStack;
  a.read_format = 8 | 4 | 1; // GROUP, ID, TOTAL_TIME_ENABLED
  a.flags = 0;
  TestSample s;
  s.ip = 0x4000;
  s.pid = 1;
  s.tid = 2;
  s.time = 3;
  s.addr = 0xdead;
  s.cpu = 7;
  s.period = 9;
  s.read_words = {2, 1000, 11, 111, 12, 222}; // nr, time_enabled, {value, id} x 2
  s.callchain = {1, 2, 3};
  s.raw = {1, 2, 3, 4};
  s.branch_words = {1, 0xa, 0xb, 0xc};
  s.regs = {1, 2, kUserSp, 0x4000, 3};
  s.stack = pattern(24, 3);
  s.dyn_size = 24;
  Built b = file_layout({a}, {sample_record(a, kMiscUser, s)}, {});
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d);
  auto r = d->records();
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& got = std::get<SampleRecord>((*r)[0].body);
  EXPECT_EQ(got.addr, 0xdeadu);
  EXPECT_EQ(got.cpu, 7u);
  EXPECT_EQ(got.period, 9u);
  EXPECT_EQ(got.callchain_size(), 3u);
  uint64_t ip = 0;
  EXPECT_TRUE(got.reg(perf_reg::kIp, ip));
  EXPECT_EQ(ip, 0x4000u);
  EXPECT_EQ(std::vector<uint8_t>(got.stack_data().begin(), got.stack_data().end()), pattern(24, 3));
  EXPECT_TRUE(survive(b).decoded);

  // Counts too big for the record.
  const uint64_t body = b.record_offsets[0] + 8;
  const size_t read_nr = body + 8 * 7; // ip tid time addr stream cpu period
  expect_error(with_u64(b.bytes, read_nr, uint64_t(1) << 61), b.record_offsets[0], "read group of");
  expect_error(with_u64(b.bytes, read_nr, ~uint64_t(0)), b.record_offsets[0], "read group of");
  const size_t callchain_nr = read_nr + 8 * 6;
  expect_error(with_u64(b.bytes, callchain_nr, uint64_t(1) << 61), b.record_offsets[0],
               "callchain of");
  expect_error(with_u64(b.bytes, callchain_nr, ~uint64_t(0)), b.record_offsets[0], "callchain of");
  expect_error(with_u64(b.bytes, callchain_nr, 50), b.record_offsets[0], "callchain of");
  const size_t raw_size = callchain_nr + 8 * 4;
  expect_error(with_u32(b.bytes, raw_size, 0xffffffff), b.record_offsets[0], "shorter than");
  const size_t branch_nr = raw_size + 8;
  expect_error(with_u64(b.bytes, branch_nr, uint64_t(1) << 62), b.record_offsets[0],
               "branch stack of");
  expect_error(with_u64(b.bytes, branch_nr, ~uint64_t(0) / 24 + 1), b.record_offsets[0],
               "branch stack of");
  const size_t stack_size = branch_nr + 8 * 4 + 8 * 6;
  expect_error(with_u64(b.bytes, stack_size, 25 + 8), b.record_offsets[0], "user stack of");
  expect_error(with_u64(b.bytes, stack_size, ~uint64_t(0)), b.record_offsets[0], "user stack of");
  // The dyn_size word is past the end when the stack claims one more byte.
  expect_error(with_u64(b.bytes, stack_size, 25), b.record_offsets[0], "shorter than");
  // A read that is not a group: value, time_enabled, id.
  TestAttr single = a;
  single.read_format = 4 | 1;
  s.read_words = {5, 1000, 11};
  Built plain = file_layout({single}, {sample_record(single, kMiscUser, s)}, {});
  auto pd = PerfData::from_bytes(plain.bytes, kName);
  ASSERT_TRUE(pd);
  auto pr = pd->records();
  ASSERT_TRUE(pr) << pr.error().to_string();
  EXPECT_EQ(std::get<SampleRecord>((*pr)[0].body).callchain_size(), 3u);
  EXPECT_EQ(std::get<SampleRecord>((*pr)[0].body).stack_data().size(), 24u);
}

// ---------------------------------------------------------------------------------------------
// The unwinder over a decoded recording.

TEST(SampleUnwinder, FollowsTheRecordedProcesses) {
  Built b = recording(false);
  auto d = PerfData::from_bytes(b.bytes, kName);
  ASSERT_TRUE(d);
  auto r = d->records();
  ASSERT_TRUE(r);
  SampleUnwinderOptions options;
  options.symbols = false;
  SampleUnwinder u(*d, options);
  std::vector<SampleStack> stacks;
  SampleStack st;
  for (const Record* rec : sorted_by_time(*r))
    if (u.feed(*rec, st)) stacks.push_back(st);
  ASSERT_EQ(stacks.size(), 3u);
  // User mode: the sampled pc, in the program's mapping (no file here to unwind further).
  EXPECT_EQ(stacks[0].comm, "prog");
  EXPECT_EQ(stacks[0].pid, 100u);
  EXPECT_EQ(stacks[0].time, 2000u);
  EXPECT_EQ(stacks[0].period, 4000u);
  ASSERT_GE(stacks[0].frames.size(), 1u);
  EXPECT_EQ(stacks[0].frames[0].pc, kUserIp);
  EXPECT_EQ(stacks[0].frames[0].module, "/nonexistent/ehelf-test/prog");
  EXPECT_EQ(stacks[0].frames[0].dso_address, kUserIp - kProgStart + kProgPgoff);
  // Kernel mode: the callchain's kernel frames, then the user pc in the library (the thread's
  // name from its comm record).
  EXPECT_EQ(stacks[1].comm, "worker");
  EXPECT_EQ(stacks[1].tid, 102u);
  ASSERT_GE(stacks[1].frames.size(), 3u);
  EXPECT_EQ(stacks[1].frames[0].pc, kKernelIp);
  EXPECT_EQ(stacks[1].frames[0].module, "[kernel.kallsyms]");
  EXPECT_EQ(stacks[1].frames[1].pc, kKernelIp + 0x10);
  EXPECT_EQ(stacks[1].frames[2].pc, kLibStart + 0x1234);
  EXPECT_EQ(stacks[1].frames[2].module, "/nonexistent/ehelf-test/libx.so");
  // A kernel thread: kernel frames only.
  EXPECT_EQ(stacks[2].comm, "swapper"); // pid 0, no COMM record: perf names it so
  ASSERT_EQ(stacks[2].frames.size(), 1u);
  EXPECT_EQ(stacks[2].frames[0].pc, kKernelIp + 0x20);
  EXPECT_EQ(stacks[2].stop, "kernel thread");
  EXPECT_EQ(u.stats().samples, 3u);
  EXPECT_EQ(u.stats().user_samples, 2u);
  EXPECT_EQ(u.stats().modules_missing, 3u); // prog, libx.so, /old (the data mapping is not code)
}

} // namespace
} // namespace ehelf::perf

// A function whose body has its CFA at rsp + 0x48 (a rule the unwinder's fast walk caches).
asm(R"(
  .text
  .p2align 4
  .globl ehelf_test_perf_frame
  .hidden ehelf_test_perf_frame
  .type ehelf_test_perf_frame, @function
ehelf_test_perf_frame:
  .cfi_startproc
  subq $0x40, %rsp
  .cfi_adjust_cfa_offset 0x40
  .globl ehelf_test_perf_frame_body
  .hidden ehelf_test_perf_frame_body
ehelf_test_perf_frame_body:
  nop
  addq $0x40, %rsp
  .cfi_adjust_cfa_offset -0x40
  ret
  .cfi_endproc
  .size ehelf_test_perf_frame, .-ehelf_test_perf_frame
)");
extern "C" void ehelf_test_perf_frame_body();

namespace ehelf::perf {
namespace {

// This process's executable mapping that holds `addr`: start, end, file offset and path.
bool mapping_of(uint64_t addr, TestMmap& m) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, path;
    uint64_t inode = 0;
    in >> range >> perms >> offset >> dev >> inode >> path;
    const uint64_t start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const uint64_t end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (addr < start || addr >= end || path.empty() || path[0] != '/') continue;
    m.start = start;
    m.len = end - start;
    m.pgoff = std::stoull(offset, nullptr, 16);
    m.filename = path;
    return true;
  }
  return false;
}

// A sample whose stack copy sits at the very top of the address space: the walk's CFA
// (rsp + 0x48) wraps around, and must not be read from outside the copy.
TEST(SampleUnwinder, StackCopyAtTheTopOfTheAddressSpace) {
  const uint64_t pc = reinterpret_cast<uint64_t>(&ehelf_test_perf_frame_body);
  TestMmap m;
  ASSERT_TRUE(mapping_of(pc, m));
  m.pid = m.tid = 300;
  TestAttr a = dwarf_attr();
  a.flags = 0;
  for (uint64_t sp : {~uint64_t(0) - 0x1f, ~uint64_t(0) - 0x47, ~uint64_t(0) - 0x17,
                      uint64_t(1) << 63, kUserSp}) {
    TestSample s;
    s.ip = pc;
    s.pid = s.tid = 300;
    s.time = 10;
    s.regs = {0, 0, sp, pc, 0};
    s.stack = pattern(0x18, 0x30);
    s.dyn_size = 0x18;
    // The sample last: its stack copy ends 8 bytes before the end of the bytes.
    Built b = file_layout({a}, {mmap2(a, m, {}), sample_record(a, kMiscUser, s)}, {});
    auto d = PerfData::from_bytes(b.bytes, kName);
    ASSERT_TRUE(d);
    auto r = d->records();
    ASSERT_TRUE(r);
    SampleUnwinderOptions options;
    options.symbols = false;
    SampleUnwinder u(*d, options);
    SampleStack st;
    bool got = false;
    for (const Record* rec : sorted_by_time(*r))
      got |= u.feed(*rec, st);
    ASSERT_TRUE(got);
    EXPECT_EQ(u.stats().modules_missing, 0u) << m.filename;
    ASSERT_GE(st.frames.size(), 1u);
    EXPECT_EQ(st.frames[0].pc, pc);
    EXPECT_EQ(st.frames[0].module, m.filename);
    // The caller's return address is not in the copy (it is 0x48 above the sampled rsp).
    EXPECT_EQ(st.frames.size(), 1u) << std::hex << sp << " " << st.stop;
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile input.

std::vector<Built> valid_inputs() {
  return {recording(false), recording(true), two_event_recording(true, false),
          two_event_recording(true, true), two_event_recording(false, false)};
}

// `perf record -o - | ehelf perf`: the records are read as they come, in windows, and give what
// the whole recording gives; a recording's file layout on a stream is read whole.
TEST(PerfData, StreamReadsAPipeAsItComes) {
  for (const Built& b : valid_inputs())
    expect_stream_as_whole(b);
  // Megabytes of samples (windows of 1 MiB, records cut at their ends) in rounds of 50 whose
  // times run backwards: each round comes out sorted.
  const TestAttr a = dwarf_attr();
  std::vector<std::vector<uint8_t>> records = recording_records(a);
  for (uint64_t round = 0; round < 8; ++round) {
    for (uint64_t i = 0; i < 50; ++i) {
      TestSample smp;
      smp.ip = kUserIp;
      smp.pid = smp.tid = 100;
      smp.time = 10000 + 1000 * round + 100 - i;
      smp.callchain = {kContextUser, kUserIp};
      smp.regs = {1, 2, kUserSp, kUserIp, 5};
      smp.stack = pattern(8192, static_cast<uint8_t>(i));
      smp.dyn_size = 8192;
      records.push_back(sample_record(a, kMiscUser, smp));
    }
    records.push_back(finished_round());
  }
  const Built big = pipe_layout({a}, records, recording_features({a}));
  ASSERT_GT(big.bytes.size(), 3u << 20);
  expect_stream_as_whole(big);
}

TEST(PerfDataHostile, EveryTruncation) {
  for (const Built& b : valid_inputs()) {
    size_t decoded = 0;
    for (size_t n = 0; n < b.bytes.size(); ++n) {
      Outcome o = survive(std::span<const uint8_t>(b.bytes).first(n));
      decoded += o.decoded;
      // The file layout's sections are all needed; in the pipe layout a cut at a record's end
      // is a shorter recording.
      // A cut inside the data section is read up to the cut, and says so.
      if (b.data_offset != 16) {
        EXPECT_TRUE(!o.parsed || !o.damage.empty()) << n;
      }
    }
    if (b.data_offset == 16) { // every record's end
      EXPECT_GE(decoded, b.record_offsets.size());
    }
    // A stream cut there ends as the bytes read whole do: the same error at the same offset
    // (as damage after the records before it), or the same records.
    if (b.data_offset == 16)
      for (size_t n = 0; n < b.bytes.size(); n += 7) {
        const std::span<const uint8_t> cut = std::span<const uint8_t>(b.bytes).first(n);
        Outcome o = survive(cut);
        Streamed st = stream(cut, static_cast<unsigned>(n));
        EXPECT_EQ(st.error.empty() ? st.damage : st.error, o.error) << n;
        if (o.decoded) {
          EXPECT_LE(st.records.size(), o.records) << n; // less perf's FINISHED_ROUNDs
          EXPECT_GE(st.records.size() + 1, o.records) << n;
        }
      }
    EXPECT_TRUE(survive(b).decoded);
  }
}

TEST(PerfDataHostile, ByteOverwritesEverywhere) {
  for (const Built& b : valid_inputs()) {
    size_t decoded = 0, runs = 0;
    for (size_t at = 0; at < b.bytes.size(); ++at) {
      for (uint8_t value : {uint8_t(0), uint8_t(0xff), uint8_t(0x80), uint8_t(0x7f),
                            uint8_t(b.bytes[at] ^ 1), uint8_t(b.bytes[at] ^ 0x40)}) {
        std::vector<uint8_t> bad = b.bytes;
        bad[at] = value;
        decoded += survive(bad).decoded;
        ++runs;
        if (b.data_offset == 16 && value == 0xff) stream(bad, static_cast<unsigned>(at));
      }
    }
    // Most positions are data: a parse that fails everywhere would test nothing.
    EXPECT_GT(decoded, runs / 4);
  }
}

TEST(PerfDataHostile, RandomCorruption) {
  std::mt19937_64 rng(20240611);
  const std::vector<Built> inputs = valid_inputs();
  size_t decoded = 0;
  const int runs = 6000;
  for (int i = 0; i < runs; ++i) {
    const Built& b = inputs[rng() % inputs.size()];
    std::vector<uint8_t> bad = b.bytes;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bad.size();
      switch (rng() % 4) {
      case 0: // a bit flip
        bad[at] ^= uint8_t(1u << (rng() % 8));
        break;
      case 1: // a random byte
        bad[at] = uint8_t(rng());
        break;
      case 2: // a 64-bit field made huge or small, at an 8-aligned place
        if (bad.size() >= 8)
          put_u64(bad, std::min(at & ~size_t(7), bad.size() - 8),
                  (rng() % 2) ? ~uint64_t(0) >> (rng() % 64) : rng() % 256);
        break;
      case 3: // a record size (u16 at 6 mod 8 in most places)
        if (bad.size() >= 8)
          put_u16(bad, std::min((at & ~size_t(7)) + 6, bad.size() - 2), uint16_t(rng()));
        break;
      }
    }
    if (rng() % 4 == 0) bad.resize(rng() % (bad.size() + 1));
    decoded += survive(bad).decoded;
    stream(bad, static_cast<unsigned>(i)); // read as a pipe: no error but good ones
  }
  EXPECT_GT(decoded, size_t(runs / 10));
}

TEST(PerfDataHostile, NotPerfData) {
  expect_error({}, 0, "truncated perf.data header");
  const std::string text = "hello, this is not a perf.data file at all\n";
  expect_error({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, 0,
               "not a perf.data file");
  Built b = recording(false);
  // Big-endian magic.
  std::vector<uint8_t> be = b.bytes;
  std::memcpy(be.data(), "2ELIFREP", 8);
  expect_error(be, 0, "big-endian");
  // The older PERFFILE magic.
  std::vector<uint8_t> old = b.bytes;
  std::memcpy(old.data(), "PERFFILE", 8);
  expect_error(old, 0, "not a perf.data file");
  // Header sizes.
  expect_error(with_u64(b.bytes, 8, 0), 8, "header size");
  expect_error(with_u64(b.bytes, 8, 103), 8, "header size");
  expect_error(with_u64(b.bytes, 8, ~uint64_t(0)), 8, "header size");
  expect_error(std::span<const uint8_t>(b.bytes).first(50), 8, "header");
  expect_error(std::span<const uint8_t>(b.bytes).first(16), 8, "header");
  expect_error(std::span<const uint8_t>(b.bytes).first(12), 0, "truncated perf.data header");
}

TEST(PerfDataHostile, FileSections) {
  Built b = recording(false);
  // The data section outside the file.
  expect_error(with_u64(b.bytes, 40, b.bytes.size() + 1), 40, "data section");
  expect_error(with_u64(b.bytes, 40, ~uint64_t(0)), 40, "data section");
  expect_damage(with_u64(b.bytes, 48, ~uint64_t(0) - 8), b.bytes.size(),
                "ends inside its data section");
  // The attribute section.
  expect_error(with_u64(b.bytes, 24, ~uint64_t(0) - 7), 24, "attribute section");
  expect_error(with_u64(b.bytes, 32, b.bytes.size()), 24, "attribute section");
  expect_error(with_u64(b.bytes, 32, 0), 0, "no event attributes");
  // Absurd attribute entry sizes.
  for (uint64_t size : {uint64_t(0), uint64_t(1), uint64_t(64 + 15), uint64_t(127),
                        uint64_t(1) << 63, ~uint64_t(0), uint64_t(b.bytes.size()) * 2})
    expect_error(with_u64(b.bytes, 16, size), 16, "attribute entry size");
  // The id array outside the file, or not whole ids.
  const uint64_t ids_entry = b.attrs_offset + 112;
  expect_error(with_u64(b.bytes, ids_entry, ~uint64_t(0)), ids_entry, "id array");
  expect_error(with_u64(b.bytes, ids_entry + 8, 12), ids_entry, "id array");
  expect_error(with_u64(b.bytes, ids_entry + 8, ~uint64_t(0) - 7), ids_entry, "id array");
  // Feature sections outside the file, and a feature table cut short.
  for (size_t i = 0; i < b.feature_offsets.size(); ++i) {
    const uint64_t entry = b.features_offset + 16 * i;
    expect_error(with_u64(b.bytes, entry, ~uint64_t(0) - 4), entry, "outside the file");
    expect_error(with_u64(b.bytes, entry + 8, b.bytes.size()), entry, "outside the file");
    expect_error(with_u64(b.bytes, entry + 8, ~uint64_t(0)), entry, "outside the file");
  }
  Built bare = file_layout({dwarf_attr()}, recording_records(dwarf_attr()), {});
  expect_error(with_u64(bare.bytes, 72, 1 << 3), bare.features_offset,
               "feature 3 has no section entry");
  expect_error(with_u64(bare.bytes, 96, uint64_t(1) << 63), bare.features_offset,
               "feature 255 has no section entry");
}

TEST(PerfDataHostile, FeatureContents) {
  Built b = recording(false);
  const uint64_t build_ids = b.feature_offsets[0], hostname = b.feature_offsets[1];
  // A build-id entry's size: too small to hold one, running past its section, zero.
  for (uint16_t size : {uint16_t(0), uint16_t(8), uint16_t(35), uint16_t(0xffff)})
    expect_error(with_u16(b.bytes, build_ids + 6, size), build_ids, "build-id entry of");
  // Its file name without a NUL: the entry ends at the name's first byte.
  expect_error(with_u16(b.bytes, build_ids + 6, 8 + 4 + 24), build_ids, "build-id entry");
  std::vector<uint8_t> noname = b.bytes;
  const uint16_t entry_size = uint16_t(noname[build_ids + 6] | noname[build_ids + 7] << 8);
  std::memset(&noname[build_ids + 36], 'A', entry_size - 36);
  expect_error(noname, build_ids, "not terminated");
  // The hostname's length past its section, or its string without a NUL.
  expect_error(with_u32(b.bytes, hostname, 0xffffffff), hostname + 4, "feature 3");
  expect_error(with_u32(b.bytes, hostname, 4), hostname + 4, "feature 3");
  // The event description: its counts and sizes.
  const uint64_t desc = b.feature_offsets[4];
  for (uint32_t nr : {2u, 1000u, 0xffffffffu})
    EXPECT_FALSE(survive(with_u32(b.bytes, desc, nr)).decoded);
  for (uint32_t size : {0u, 8u, 113u, 0x7fffffffu, 0xffffffffu})
    survive(with_u32(b.bytes, desc + 4, size));
  for (uint32_t nr_ids : {2u, 0x10000000u, 0xffffffffu})
    survive(with_u32(b.bytes, desc + 8 + 112, nr_ids));
}

TEST(PerfDataHostile, RecordSizes) {
  for (bool pipe : {false, true}) {
    Built b = recording(pipe);
    for (uint64_t at : b.record_offsets) {
      for (uint16_t size : {uint16_t(0), uint16_t(1), uint16_t(7)})
        expect_error(with_u16(b.bytes, at + 6, size), at, "does not fit");
      // Past the end of the data.
      const uint64_t end = pipe ? b.bytes.size() : b.features_offset;
      if (end - at < 0xffff)
        expect_error(with_u16(b.bytes, at + 6, uint16_t(end - at + 8)), at, "does not fit");
      if (pipe)
        expect_error(std::span<const uint8_t>(b.bytes).first(at + 4), at,
                     "truncated record header");
      else // read up to the cut
        expect_damage(std::span<const uint8_t>(b.bytes).first(at + 4), at + 4,
                      "ends inside its data section");
    }
  }
  // The file layout's data section ending inside a record, or inside a record header (no
  // features after it, so that only the data section moves).
  Built b = file_layout({dwarf_attr()}, recording_records(dwarf_attr()), {});
  const uint64_t data_size = b.bytes.size() - b.data_offset;
  expect_error(with_u64(b.bytes, 48, data_size - 4), b.record_offsets.back(), "does not fit");
  expect_error(with_u64(b.bytes, 48, b.record_offsets.back() + 4 - b.data_offset),
               b.record_offsets.back(), "truncated record header");
  expect_error(with_u64(b.bytes, 48, b.record_offsets[3] + 12 - b.data_offset), b.record_offsets[3],
               "does not fit");
}

TEST(PerfDataHostile, RecordContents) {
  Built b = recording(false);
  const std::vector<uint64_t>& at = b.record_offsets;
  // An mmap2 shorter than its fields, or with its file name running into the trailer.
  auto shorter = [&](size_t index, uint16_t size) {
    std::vector<uint8_t> bad = b.bytes;
    const uint16_t old = uint16_t(bad[at[index] + 6] | bad[at[index] + 7] << 8);
    put_u16(bad, at[index] + 6, size);
    // Keep the records after it in place: a finished-round record's header fills the gap when
    // there is room for one, else the data section ends there.
    if (old - size >= 8) {
      put_u32(bad, at[index] + size, record_type::kFinishedRound);
      put_u16(bad, at[index] + size + 4, 0);
      put_u16(bad, at[index] + size + 6, uint16_t(old - size));
    }
    return bad;
  };
  expect_error(shorter(1, 8 + 24), at[1], "mmap record");
  expect_error(shorter(1, 8 + 40 + 24), at[1], "mmap record");
  expect_error(shorter(1, 8 + 8), at[1], "record too short for its sample id");
  std::vector<uint8_t> name = b.bytes;
  const size_t name_at = at[2] + 8 + 40 + 24 + 8;
  std::memset(&name[name_at], 'x', at[3] - name_at - 16); // up to the trailer
  expect_error(name, at[2], "not terminated");
  expect_error(shorter(0, 8 + 4), at[0], "sample id");
  std::vector<uint8_t> comm_name = b.bytes;
  std::memset(&comm_name[at[0] + 16], 'c', 8);
  expect_error(comm_name, at[0], "comm record");
  // Records whose trailer leaves too little for their fields.
  expect_error(shorter(4, 8 + 16 + 16), at[4], "fork/exit record is truncated");
  expect_error(shorter(11, 8 + 16 + 16), at[11], "fork/exit record is truncated");
  expect_error(shorter(8, 8 + 24), at[8], "lost record is truncated");
  // A sample without room for its registers or stack size.
  expect_error(shorter(6, 8 + 56), at[6], "shorter than");
  // A register set claimed (abi) where the kernel thread's sample has none.
  std::vector<uint8_t> abi = b.bytes;
  put_u64(abi, at[10] + 8 + 32 + 24, 2);
  expect_error(abi, at[10], "shorter than");
  // A compressed record whose payload is not zstd data.
  std::vector<uint8_t> compressed = b.bytes;
  put_u32(compressed, at[8], record_type::kCompressed);
  expect_error(compressed, at[8], "zstd");
  // Unknown record types are kept (with their time when they have a trailer).
  std::vector<uint8_t> unknown = b.bytes;
  put_u32(unknown, at[8], 21);
  EXPECT_TRUE(survive(unknown).decoded);
  put_u32(unknown, at[8], 0);
  EXPECT_TRUE(survive(unknown).decoded);
  put_u32(unknown, at[8], 0xffffffff);
  EXPECT_TRUE(survive(unknown).decoded);
}

TEST(PerfDataHostile, PipePayloads) {
  const std::vector<TestAttr> attrs{dwarf_attr()};
  auto records = recording_records(attrs[0]);
  // HEADER_TRACING_DATA (a u32 size, then that much data after the record) and AUXTRACE (a u64
  // size first): in bounds they are skipped, past the end they are an error.
  Writer tracing;
  tracing.u32(16).u32(0);
  std::vector<uint8_t> tracing_record = record(record_type::kHeaderTracingData, 0, tracing);
  tracing_record.resize(tracing_record.size() + 16, 0xee);
  Writer aux;
  aux.u64(24).u64(0).u64(0).u32(0).u32(0).u32(0).u32(0);
  std::vector<uint8_t> aux_record = record(record_type::kAuxtrace, 0, aux);
  aux_record.resize(aux_record.size() + 24, 0xdd);
  // Rebuilt rather than insert()ed: GCC 12 -O2 reports a false -Warray-bounds in insert.
  std::vector<std::vector<uint8_t>> spliced;
  for (size_t i = 0; i < records.size(); ++i) {
    if (i == 2) spliced.push_back(tracing_record); // at 2
    if (i == 4) spliced.push_back(aux_record);     // at 5, after the one above
    spliced.push_back(records[i]);
  }
  ASSERT_GT(records.size(), 4u);
  records = std::move(spliced);
  Built b = pipe_layout(attrs, records, recording_features(attrs));
  Outcome ok = survive(b);
  ASSERT_TRUE(ok.decoded) << ok.error;
  EXPECT_EQ(ok.records, records.size());
  const uint64_t t = b.record_offsets[2], x = b.record_offsets[5];
  for (uint32_t n : {uint32_t(b.bytes.size()), 0x10000u, 0xffffffffu})
    expect_error(with_u32(b.bytes, t + 8, n), t, "runs past the end");
  for (uint64_t n : {uint64_t(b.bytes.size()), uint64_t(1) << 63, ~uint64_t(0)})
    expect_error(with_u64(b.bytes, x + 8, n), x, "runs past the end");
  // The same payload sizes at the very end.
  std::vector<uint8_t> last = b.bytes;
  last.insert(last.end(), aux_record.begin(), aux_record.begin() + 8 + 48);
  expect_error(last, b.bytes.size(), "runs past the end");
  expect_stream_as_whole(b);
  // A payload of megabytes between records: a stream reads past it across its windows.
  std::vector<uint8_t> big = tracing_record;
  put_u32(big, 8, 3u << 20);
  big.resize(big.size() - 16 + (3u << 20), 0xee);
  std::vector<std::vector<uint8_t>> with_big = records;
  with_big.insert(with_big.begin() + 6, big);
  expect_stream_as_whole(pipe_layout(attrs, with_big, recording_features(attrs)));
  // The same records in the file layout.
  Built f = file_layout(attrs, records, recording_features(attrs));
  EXPECT_TRUE(survive(f).decoded);
  expect_error(with_u64(f.bytes, f.record_offsets[5] + 8, ~uint64_t(0)), f.record_offsets[5],
               "runs past the end");
  // Pipe-mode header records: an attribute too short, or whose own size is wrong.
  Built p = recording(true);
  expect_error(with_u16(p.bytes, 16 + 6, 8 + 63), 16 + 8, "shorter than");
  expect_error(with_u32(p.bytes, 16 + 8 + 4, 0xffff), 16 + 8 + 4, "attribute size");
  expect_error(with_u32(p.bytes, 16 + 8 + 4, 63), 16 + 8 + 4, "attribute size");
  // No attributes at all.
  std::vector<uint8_t> none = p.bytes;
  put_u32(none, 16, record_type::kFinishedRound);
  expect_error(none, 0, "no event attributes");
  expect_error(std::span<const uint8_t>(p.bytes).first(16), 0, "no event attributes");
}

TEST(PerfData, CompressedRecords) {
  const std::vector<TestAttr> attrs{dwarf_attr()};
  const auto plain = recording_records(attrs[0]);
  for (bool pipe : {false, true}) {
    // The stream cut in three, the records continuing across the cuts.
    auto records = compressed_records(plain, {40, 41});
    records.insert(records.begin(), comm(attrs[0], 1, 1, "before", false, {1, 1, 5, 101}));
    records.push_back(comm(attrs[0], 1, 1, "after", false, {1, 1, 5000, 101}));
    const auto features = recording_features(attrs);
    Built b = pipe ? pipe_layout(attrs, records, features) : file_layout(attrs, records, features);
    auto d = PerfData::from_bytes(b.bytes, kName);
    ASSERT_TRUE(d) << d.error().to_string();
    auto r = d->records();
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_EQ(r->size(), plain.size() + 2);
    EXPECT_EQ(std::get<CommRecord>(r->front().body).comm, "before");
    EXPECT_EQ(std::get<CommRecord>(r->back().body).comm, "after");
    const uint32_t types[] = {3, 10, 10, 10, 7, 3, 9, 9, 2, 68, 9, 4, 1};
    for (size_t i = 0; i < std::size(types); ++i)
      EXPECT_EQ((*r)[i + 1].type, types[i]) << i;
    const auto& s = std::get<SampleRecord>((*r)[7].body);
    EXPECT_EQ(s.ip, kUserIp);
    EXPECT_EQ(s.time, 2000u);
    EXPECT_EQ(std::vector<uint8_t>(s.stack_data().begin(), s.stack_data().end()), pattern(48, 7));
    EXPECT_EQ(std::get<MmapRecord>((*r)[2].body).filename, "/nonexistent/ehelf-test/prog");
    Outcome o = survive(b.bytes, true);
    EXPECT_TRUE(o.decoded) << o.error;
    EXPECT_EQ(o.samples, 3u);
    expect_stream_as_whole(b);
  }
}

TEST(PerfDataHostile, CompressedRecords) {
  const std::vector<TestAttr> attrs{dwarf_attr()};
  const auto plain = recording_records(attrs[0]);
  auto cut_after = compressed_records(plain, {});
  // The records' end missing: a whole zstd frame whose last record is cut.
  std::vector<uint8_t> all;
  for (const auto& r : plain)
    all.insert(all.end(), r.begin(), r.end());
  const std::vector<uint8_t> z = zstd_compress(all);
  {
    const std::vector<uint8_t> cut =
        zstd_compress(std::span<const uint8_t>(all).first(all.size() - 4));
    Built b = file_layout(attrs, {record(record_type::kCompressed, 0, cut)}, {});
    expect_error(b.bytes, b.bytes.size(), "compressed data ends inside a record");
    // The zstd frame itself cut: what was decompressed is kept (no crash, no read past it).
    std::vector<uint8_t> half(z.begin(), z.begin() + long(z.size() / 2));
    b = file_layout(attrs, {record(record_type::kCompressed, 0, half)}, {});
    survive(b.bytes, true);
  }
  // Not zstd data; an empty compressed record (nothing to decompress).
  {
    Built b = file_layout(attrs, {record(record_type::kCompressed, 0, all)}, {});
    expect_error(b.bytes, b.record_offsets[0], "zstd");
    Built empty = file_layout(attrs, {record(record_type::kCompressed, 0, {})}, {});
    EXPECT_TRUE(survive(empty.bytes, true).decoded);
  }
  // Records inside: a compressed one (no nesting), one of size 0, one running past the end.
  {
    std::vector<std::vector<uint8_t>> inner = {plain[0], record(record_type::kCompressed, 0, z)};
    Built b = file_layout(attrs, compressed_records(inner, {}), {});
    expect_error(b.bytes, b.record_offsets[0], "inside compressed data");
    std::vector<uint8_t> zero = plain[0];
    put_u16(zero, 6, 0);
    b = file_layout(attrs, compressed_records({zero}, {}), {});
    expect_error(b.bytes, b.record_offsets[0], "record of 0 bytes");
    std::vector<uint8_t> sample = plain[6];
    put_u64(sample, 8 + 32, 1000); // callchain nr
    b = file_layout(attrs, compressed_records({plain[0], sample}, {}), {});
    expect_error(b.bytes, b.record_offsets[0], "callchain of 1000 entries");
  }
  // A record expanding beyond what one compressed record may hold (64 MiB).
  {
    std::vector<uint8_t> big(65u << 20);
    Built b = file_layout(attrs, compressed_records({big}, {}), {});
    ASSERT_LT(b.bytes.size(), 65536u);
    expect_error(b.bytes, b.record_offsets[0], "beyond 64 MiB");
  }
  // Every byte of a compressed recording overwritten (zstd frames carry no checksum here: the
  // changes reach the records inside), and every truncation.
  {
    auto records = compressed_records(plain, {60});
    Built b = file_layout(attrs, records, recording_features(attrs));
    size_t decoded = 0;
    for (size_t at = b.data_offset; at < b.features_offset; ++at)
      for (uint8_t value : {uint8_t(0), uint8_t(0xff), uint8_t(b.bytes[at] ^ 1)}) {
        std::vector<uint8_t> bad = b.bytes;
        bad[at] = value;
        decoded += survive(bad, true).decoded;
      }
    EXPECT_GT(decoded, 0u);
    Built p = pipe_layout(attrs, records, recording_features(attrs));
    for (size_t n = 0; n < p.bytes.size(); ++n)
      survive(std::span<const uint8_t>(p.bytes).first(n), true);
  }
}

TEST(PerfDataHostile, ManyIdsStayBounded) {
  // Many attributes sharing one big id array: the ids they claim would be far more than the
  // file holds.
  TestAttr a = dwarf_attr();
  a.sample_type |= kIdentifier;
  std::vector<TestAttr> attrs(400, a);
  for (size_t i = 0; i < attrs.size(); ++i)
    attrs[i].ids = {i};
  Built b = file_layout(attrs, {}, {});
  // Every attribute's id array: the same 8000 ids (64 KB) appended at the end.
  const uint64_t ids_at = b.bytes.size();
  for (uint64_t i = 0; i < 8000; ++i) {
    b.bytes.resize(b.bytes.size() + 8);
    put_u64(b.bytes, b.bytes.size() - 8, 1000 + i);
  }
  for (size_t i = 0; i < attrs.size(); ++i) {
    put_u64(b.bytes, b.attrs_offset + 128 * i + 112, ids_at);
    put_u64(b.bytes, b.attrs_offset + 128 * i + 120, 8 * 8000);
  }
  Outcome o = survive(b);
  EXPECT_FALSE(o.parsed);
  EXPECT_NE(o.error.find("id array"), std::string::npos) << o.error;
}

// Resident memory of this process, in bytes.
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Shapes that once blew up time and memory: tens of thousands of mappings in one process
// (carving them was quadratic) and thousands of forks of a process with thousands of mappings
// (each fork copied them all, names included). Memory must stay O(file): the limit is generous
// (ASan builds), far below what the old code took. The time each shape takes is recorded as the
// test's property "seconds_<mappings>_<forks>", not checked: bench/run_perf_hostile.sh
// tabulates it (bench/results/perf_hostile.md).
TEST(PerfDataHostile, ManyMappingsAndForksStayCheap) {
  const TestAttr a = dwarf_attr();
  for (const auto& [mappings, forks] : {std::pair{40000, 0}, std::pair{4000, 4000}}) {
    std::vector<std::vector<uint8_t>> r;
    for (int i = 0; i < mappings; ++i) {
      TestMmap m;
      m.pid = m.tid = 100;
      m.start = 0x10000000 + 0x2000 * uint64_t(i);
      m.len = 0x1000;
      m.filename = fmt::format("/nonexistent/ehelf-test/library-with-a-long-name-{}.so", i);
      r.push_back(mmap2(a, m, {100, 100, 1, 101}));
    }
    for (int i = 0; i < forks; ++i)
      r.push_back(task(record_type::kFork, a, 1000 + i, 100, 1000 + i, 100, {100, 100, 2, 101}));
    Built b = file_layout({a}, r, {});
    const uint64_t before = resident_bytes();
    const auto start = std::chrono::steady_clock::now();
    auto d = PerfData::from_bytes(b.bytes, kName);
    ASSERT_TRUE(d) << d.error().to_string();
    auto records = d->records();
    ASSERT_TRUE(records);
    SampleUnwinder u(*d, {});
    SampleStack st;
    for (const Record& rec : *records)
      u.feed(rec, st);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RecordProperty(fmt::format("seconds_{}_{}", mappings, forks), fmt::format("{:.3f}", seconds));
    const uint64_t grown = resident_bytes() - std::min(before, resident_bytes());
    EXPECT_LT(grown, uint64_t(400) << 20)
        << mappings << " mappings, " << forks << " forks: " << (grown >> 20) << " MiB";
    EXPECT_EQ(u.stats().modules_missing, uint64_t(mappings));
  }
}

TEST(PerfDataHostile, MappedFifo) {
  // A recording whose mapping names a FIFO (or a directory): the unwinder must not open it for
  // reading (a FIFO would block until a writer came).
  const std::string fifo = ::testing::TempDir() + "ehelf_test_perf_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  TestAttr a = dwarf_attr();
  TestMmap m{.pid = 1, .tid = 1, .start = kProgStart, .len = 0x1000, .filename = fifo};
  TestMmap dir = m;
  dir.start = kLibStart;
  dir.filename = ::testing::TempDir();
  TestSample s;
  s.ip = kProgStart + 0x10;
  s.pid = s.tid = 1;
  s.time = 5;
  s.regs = {0, 0, kUserSp, s.ip, 0};
  s.stack = pattern(16, 0);
  s.dyn_size = 16;
  Outcome o = survive(file_layout(
      {a},
      {mmap2(a, m, {1, 1, 1, 101}), mmap2(a, dir, {1, 1, 2, 101}), sample_record(a, kMiscUser, s)},
      {}));
  EXPECT_TRUE(o.decoded) << o.error;
  EXPECT_EQ(o.samples, 1u);
  std::remove(fifo.c_str());
}

TEST(PerfDataHostile, UnwinderWithHostileRegisters) {
  // Samples whose registers and stack copies are nonsense, for a process with a real module
  // (this test program, mapped where it is).
  const uint64_t pc = reinterpret_cast<uint64_t>(&ehelf_test_perf_frame_body);
  TestMmap m;
  ASSERT_TRUE(mapping_of(pc, m));
  m.pid = m.tid = 1;
  TestAttr a = dwarf_attr();
  std::vector<std::vector<uint8_t>> records{mmap2(a, m, {1, 1, 1, 101})};
  std::mt19937_64 rng(7);
  const uint64_t interesting[] = {0,
                                  1,
                                  pc,
                                  pc + 1,
                                  m.start,
                                  m.start + m.len - 1,
                                  kUserSp,
                                  ~uint64_t(0),
                                  ~uint64_t(0) - 7,
                                  ~uint64_t(0) - 0x40,
                                  uint64_t(1) << 63,
                                  (uint64_t(1) << 63) - 8};
  for (int i = 0; i < 300; ++i) {
    TestSample s;
    s.pid = s.tid = 1;
    s.time = 10 + uint64_t(i);
    auto pick = [&] { return interesting[rng() % std::size(interesting)] + rng() % 3 * 8; };
    s.ip = pick();
    const uint64_t sp = pick();
    s.regs = {pick(), pick(), sp, s.ip, pick()};
    s.stack = pattern(8 * (rng() % 24), uint8_t(i));
    // Return addresses into the module, and pointers into the copy, in the copy.
    for (size_t w = 0; w + 8 <= s.stack.size(); w += 8) {
      const uint64_t v = rng() % 2 ? pc + rng() % 64 : sp + 8 * (rng() % 8);
      std::memcpy(&s.stack[w], &v, 8);
    }
    s.dyn_size = rng() % 2 ? s.stack.size() : rng();
    records.push_back(sample_record(a, kMiscUser, s));
  }
  Outcome o = survive(file_layout({a}, records, {}));
  EXPECT_TRUE(o.decoded) << o.error;
  EXPECT_EQ(o.samples, 300u);
}

} // namespace
} // namespace ehelf::perf
