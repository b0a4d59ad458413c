// PerfData (the perf.data reader) on valid files: perf.data bytes built from scratch
// (perf_recording.hpp), in the file and the pipe layout, every decoded field the one written;
// several events, older attribute sizes, compressed records, a recording read as a stream as it
// comes. Hostile files: test_perf_data_hostile.cpp; the unwinder over a decoded recording:
// test_sample_unwinder.cpp.
#include <gtest/gtest.h>

#include "perf_data_checks.hpp"

namespace ehelf::perf {
namespace {

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
} // namespace
} // namespace ehelf::perf
