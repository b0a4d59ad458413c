// perf.data bytes built from scratch for the tests of the reader and of what reads through it
// (test_perf_data.cpp, test_record_stream.cpp, test_stack_pipeline.cpp, test_profile.cpp): the
// file layout (104-byte header, attribute section with id arrays, data section, feature
// sections after it) and the pipe layout (16-byte header, then PERF_RECORD_HEADER_ATTR /
// HEADER_FEATURE / HEADER_BUILD_ID records, then the data); the records one by one; a
// recording of every kind of record, of two events, of thousands of samples; compressed
// records (perf record -z).
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "perf/perf_data.hpp"

// (In an anonymous namespace, as the tests' own helpers are: each test file has its copy.)
namespace ehelf::perf {
namespace {

// ---------------------------------------------------------------------------------------------
// The builder.

// Little-endian bytes.
class Writer {
public:
  Writer& u8(uint8_t v) {
    b_.push_back(v);
    return *this;
  }
  Writer& u16(uint16_t v) { return le(v); }
  Writer& u32(uint32_t v) { return le(v); }
  Writer& u64(uint64_t v) { return le(v); }
  Writer& bytes(std::span<const uint8_t> s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Writer& zeros(size_t n) {
    b_.resize(b_.size() + n);
    return *this;
  }
  // `s`, its NUL, then NULs up to a multiple of `align`.
  Writer& str(std::string_view s, size_t align = 8) {
    b_.insert(b_.end(), s.begin(), s.end());
    b_.push_back(0);
    while (b_.size() % align)
      b_.push_back(0);
    return *this;
  }
  // s without a NUL.
  Writer& unterminated(std::string_view s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  size_t size() const { return b_.size(); }
  const std::vector<uint8_t>& data() const { return b_; }
  operator std::span<const uint8_t>() const { return b_; }

private:
  template <class T> Writer& le(T v) {
    uint8_t buf[sizeof v];
    std::memcpy(buf, &v, sizeof v);
    b_.insert(b_.end(), buf, buf + sizeof v);
    return *this;
  }
  std::vector<uint8_t> b_;
};

template <class T> void put(std::vector<uint8_t>& b, size_t at, T v) {
  ASSERT_LE(at + sizeof v, b.size());
  std::memcpy(b.data() + at, &v, sizeof v);
}
inline void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  put(b, at, v);
}
inline void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  put(b, at, v);
}
inline void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  put(b, at, v);
}

constexpr uint64_t kFreq = uint64_t(1) << 10, kSampleIdAll = uint64_t(1) << 18;
constexpr uint16_t kMiscKernel = 1, kMiscUser = 2, kMiscCommExec = 1 << 13,
                   kMiscMmapBuildId = 1 << 14, kMiscBuildIdSize = 1 << 15;
constexpr uint64_t kContextKernel = static_cast<uint64_t>(-128);
constexpr uint64_t kContextUser = static_cast<uint64_t>(-512);

// perf_event_attr as perf writes it (the 112-byte version 5 layout).
struct TestAttr {
  uint32_t type = 1; // PERF_TYPE_SOFTWARE
  uint64_t config = 0;
  uint64_t period = 4000;
  uint64_t sample_type = 0;
  uint64_t read_format = 0;
  uint64_t flags = kFreq | kSampleIdAll;
  uint64_t branch_sample_type = 0;
  uint64_t regs_user = 0;
  uint32_t stack_user = 0;
  std::vector<uint64_t> ids;
  std::string name;

  std::vector<uint8_t> encode(uint32_t size = 112) const {
    Writer w;
    w.u32(type).u32(size).u64(config).u64(period).u64(sample_type).u64(read_format).u64(flags);
    w.u32(0).u32(0);                                                 // wakeup_events, bp_type
    w.u64(0).u64(0);                                                 // config1, config2
    w.u64(branch_sample_type).u64(regs_user).u32(stack_user).u32(0); // ..., clockid
    w.u64(0);                                                        // sample_regs_intr
    w.u32(0).u16(0).u16(0); // aux_watermark, max_stack, reserved
    std::vector<uint8_t> b = w.data();
    b.resize(size);
    return b;
  }
};

using sample::kCallchain, sample::kIp, sample::kTid, sample::kTime, sample::kPeriod,
    sample::kRegsUser, sample::kStackUser, sample::kIdentifier, sample::kId, sample::kCpu,
    sample::kRead, sample::kBranchStack, sample::kRaw, sample::kAddr, sample::kStreamId;

// The registers our samples carry: rbx, rbp, rsp, rip and r15 (in perf's bit order).
constexpr uint64_t kRegsMask = (uint64_t(1) << perf_reg::kBx) | (uint64_t(1) << perf_reg::kBp) |
                               (uint64_t(1) << perf_reg::kSp) | (uint64_t(1) << perf_reg::kIp) |
                               (uint64_t(1) << perf_reg::kR15);
constexpr uint64_t kDwarfSampleType =
    kIp | kTid | kTime | kPeriod | kCallchain | kRegsUser | kStackUser;

inline TestAttr dwarf_attr() {
  TestAttr a;
  a.sample_type = kDwarfSampleType;
  a.regs_user = kRegsMask;
  a.stack_user = 64;
  a.ids = {101};
  a.name = "cpu-clock";
  return a;
}

inline std::vector<uint8_t> record(uint32_t type, uint16_t misc, std::span<const uint8_t> body) {
  Writer w;
  w.u32(type).u16(misc).u16(static_cast<uint16_t>(8 + body.size())).bytes(body);
  return w.data();
}

// The sample_id fields of a non-sample record.
struct SampleId {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0, id = 0;
  uint32_t cpu = 0;
};

inline void trailer(Writer& w, const TestAttr& a, const SampleId& s) {
  if (!(a.flags & kSampleIdAll)) return;
  const uint64_t st = a.sample_type;
  if (st & kTid) w.u32(s.pid).u32(s.tid);
  if (st & kTime) w.u64(s.time);
  if (st & kId) w.u64(s.id);
  if (st & kStreamId) w.u64(s.id);
  if (st & kCpu) w.u32(s.cpu).u32(0);
  if (st & kIdentifier) w.u64(s.id);
}

struct TestMmap {
  uint32_t pid = 0, tid = 0;
  uint64_t start = 0, len = 0, pgoff = 0;
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0;
  uint32_t prot = 5, flags = 2; // PROT_READ|PROT_EXEC, MAP_PRIVATE
  std::string filename;
  std::vector<uint8_t> build_id; // non-empty: PERF_RECORD_MISC_MMAP_BUILD_ID
};

inline std::vector<uint8_t> mmap2(const TestAttr& a, const TestMmap& m, SampleId s) {
  Writer w;
  w.u32(m.pid).u32(m.tid).u64(m.start).u64(m.len).u64(m.pgoff);
  uint16_t misc = kMiscUser;
  if (!m.build_id.empty()) {
    misc |= kMiscMmapBuildId;
    w.u8(static_cast<uint8_t>(m.build_id.size())).u8(0).u16(0).bytes(m.build_id);
    w.zeros(20 - m.build_id.size());
  } else {
    w.u32(m.maj).u32(m.min).u64(m.ino).u64(0);
  }
  w.u32(m.prot).u32(m.flags).str(m.filename);
  trailer(w, a, s);
  return record(record_type::kMmap2, misc, w);
}

inline std::vector<uint8_t> mmap1(const TestAttr& a, const TestMmap& m, SampleId s) {
  Writer w;
  w.u32(m.pid).u32(m.tid).u64(m.start).u64(m.len).u64(m.pgoff).str(m.filename);
  trailer(w, a, s);
  return record(record_type::kMmap, kMiscUser, w);
}

inline std::vector<uint8_t> comm(const TestAttr& a, uint32_t pid, uint32_t tid,
                                 std::string_view name, bool exec, SampleId s) {
  Writer w;
  w.u32(pid).u32(tid).str(name);
  trailer(w, a, s);
  return record(record_type::kComm, exec ? kMiscCommExec : 0, w);
}

inline std::vector<uint8_t> task(uint32_t type, const TestAttr& a, uint32_t pid, uint32_t ppid,
                                 uint32_t tid, uint32_t ptid, SampleId s) {
  Writer w;
  w.u32(pid).u32(ppid).u32(tid).u32(ptid).u64(s.time);
  trailer(w, a, s);
  return record(type, 0, w);
}

inline std::vector<uint8_t> lost(const TestAttr& a, uint64_t id, uint64_t count, SampleId s) {
  Writer w;
  w.u64(id).u64(count);
  trailer(w, a, s);
  return record(record_type::kLost, 0, w);
}

struct TestSample {
  uint64_t id = 0, ip = 0, time = 0, addr = 0, period = 1;
  uint32_t pid = 0, tid = 0, cpu = 0;
  std::vector<uint64_t> read_words;   // PERF_SAMPLE_READ, as written
  std::vector<uint64_t> callchain;    // PERF_SAMPLE_CALLCHAIN entries
  std::vector<uint8_t> raw;           // PERF_SAMPLE_RAW data (after its u32 size)
  std::vector<uint64_t> branch_words; // PERF_SAMPLE_BRANCH_STACK, nr first
  uint64_t regs_abi = 2;              // PERF_SAMPLE_REGS_ABI_64
  std::vector<uint64_t> regs;         // in mask bit order
  std::vector<uint8_t> stack;
  uint64_t dyn_size = 0;
};

inline std::vector<uint8_t> sample_record(const TestAttr& a, uint16_t misc, const TestSample& s) {
  const uint64_t st = a.sample_type;
  Writer w;
  if (st & kIdentifier) w.u64(s.id);
  if (st & kIp) w.u64(s.ip);
  if (st & kTid) w.u32(s.pid).u32(s.tid);
  if (st & kTime) w.u64(s.time);
  if (st & kAddr) w.u64(s.addr);
  if (st & kId) w.u64(s.id);
  if (st & kStreamId) w.u64(s.id);
  if (st & kCpu) w.u32(s.cpu).u32(0);
  if (st & kPeriod) w.u64(s.period);
  if (st & kRead)
    for (uint64_t v : s.read_words)
      w.u64(v);
  if (st & kCallchain) {
    w.u64(s.callchain.size());
    for (uint64_t pc : s.callchain)
      w.u64(pc);
  }
  if (st & kRaw) w.u32(static_cast<uint32_t>(s.raw.size())).bytes(s.raw);
  if (st & kBranchStack)
    for (uint64_t v : s.branch_words)
      w.u64(v);
  if (st & kRegsUser) {
    w.u64(s.regs_abi);
    if (s.regs_abi)
      for (uint64_t r : s.regs)
        w.u64(r);
  }
  if (st & kStackUser) {
    w.u64(s.stack.size()).bytes(s.stack);
    if (!s.stack.empty()) w.u64(s.dyn_size);
  }
  return record(record_type::kSample, misc, w);
}

inline std::vector<uint8_t> finished_round() {
  return record(record_type::kFinishedRound, 0, {});
}

// Feature sections.
struct Feature {
  unsigned bit;
  std::vector<uint8_t> bytes;
};
constexpr unsigned kFeatBuildId = 2, kFeatHostname = 3, kFeatOsRelease = 4, kFeatArch = 6,
                   kFeatEventDesc = 12;

inline std::vector<uint8_t> feature_string(std::string_view s) {
  Writer body;
  body.str(s, 64);
  Writer w;
  w.u32(static_cast<uint32_t>(body.size())).bytes(body);
  return w.data();
}

// A build_id_event (a HEADER_BUILD_ID feature entry, or pipe mode's record of type 67).
inline std::vector<uint8_t> build_id_entry(uint32_t pid, uint16_t cpumode, std::vector<uint8_t> id,
                                           std::string_view filename, bool with_size) {
  Writer body;
  body.u32(pid).bytes(id).zeros(20 - id.size());
  body.u8(with_size ? static_cast<uint8_t>(id.size()) : 0).u8(0).u16(0);
  body.str(filename, 64);
  return record(record_type::kHeaderBuildId,
                static_cast<uint16_t>(cpumode | (with_size ? kMiscBuildIdSize : 0)), body);
}

inline std::vector<uint8_t> event_desc(const std::vector<TestAttr>& attrs) {
  Writer w;
  w.u32(static_cast<uint32_t>(attrs.size())).u32(112);
  for (const TestAttr& a : attrs) {
    w.bytes(a.encode());
    w.u32(static_cast<uint32_t>(a.ids.size()));
    w.bytes(feature_string(a.name));
    for (uint64_t id : a.ids)
      w.u64(id);
  }
  return w.data();
}

inline std::vector<uint8_t> ids_of(uint64_t first, size_t n) {
  std::vector<uint8_t> id;
  for (size_t i = 0; i < n; ++i)
    id.push_back(static_cast<uint8_t>(first + i));
  return id;
}

// A perf.data in memory and where its parts are.
struct Built {
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> record_offsets; // of the data records
  uint64_t data_offset = 0, attrs_offset = 0, features_offset = 0;
  std::vector<uint64_t> feature_offsets; // of each feature's section (file layout)
};

inline Built file_layout(const std::vector<TestAttr>& attrs,
                         const std::vector<std::vector<uint8_t>>& records,
                         const std::vector<Feature>& features, uint32_t attr_size = 112) {
  Built b;
  Writer w;
  w.zeros(104);
  std::vector<uint64_t> id_offsets;
  for (const TestAttr& a : attrs) {
    id_offsets.push_back(w.size());
    for (uint64_t id : a.ids)
      w.u64(id);
  }
  b.attrs_offset = w.size();
  for (size_t i = 0; i < attrs.size(); ++i)
    w.bytes(attrs[i].encode(attr_size)).u64(id_offsets[i]).u64(8 * attrs[i].ids.size());
  const uint64_t attrs_size = w.size() - b.attrs_offset;
  b.data_offset = w.size();
  for (const auto& r : records) {
    b.record_offsets.push_back(w.size());
    w.bytes(r);
  }
  const uint64_t data_size = w.size() - b.data_offset;
  b.features_offset = w.size();
  w.zeros(16 * features.size());
  uint64_t bits[4] = {};
  std::vector<uint8_t> out = w.data();
  for (size_t i = 0; i < features.size(); ++i) {
    bits[features[i].bit / 64] |= uint64_t(1) << (features[i].bit % 64);
    b.feature_offsets.push_back(out.size());
    put_u64(out, b.features_offset + 16 * i, out.size());
    put_u64(out, b.features_offset + 16 * i + 8, features[i].bytes.size());
    out.insert(out.end(), features[i].bytes.begin(), features[i].bytes.end());
  }
  std::memcpy(out.data(), "PERFILE2", 8);
  put_u64(out, 8, 104);
  put_u64(out, 16, attr_size + 16);
  put_u64(out, 24, b.attrs_offset);
  put_u64(out, 32, attrs_size);
  put_u64(out, 40, b.data_offset);
  put_u64(out, 48, data_size);
  for (int i = 0; i < 4; ++i)
    put_u64(out, 72 + 8 * size_t(i), bits[i]);
  b.bytes = std::move(out);
  return b;
}

// Pipe layout: the attributes, then the features and build ids as records, then the data.
inline Built pipe_layout(const std::vector<TestAttr>& attrs,
                         const std::vector<std::vector<uint8_t>>& records,
                         const std::vector<Feature>& features) {
  Built b;
  Writer w;
  w.unterminated("PERFILE2").u64(16);
  for (const TestAttr& a : attrs) {
    Writer body;
    body.bytes(a.encode());
    for (uint64_t id : a.ids)
      body.u64(id);
    w.bytes(record(record_type::kHeaderAttr, 0, body));
  }
  for (const Feature& f : features) {
    if (f.bit == kFeatBuildId) { // perf sends build ids as their own records
      w.bytes(f.bytes);
      continue;
    }
    if (f.bit == kFeatEventDesc) continue; // not sent in pipe mode
    Writer body;
    body.u64(f.bit).bytes(f.bytes);
    w.bytes(record(record_type::kHeaderFeature, 0, body));
  }
  b.data_offset = 16;
  for (const auto& r : records) {
    b.record_offsets.push_back(w.size());
    w.bytes(r);
  }
  b.bytes = w.data();
  return b;
}

// ---------------------------------------------------------------------------------------------
// A recording of one program: exec, its mappings, a thread, samples in user and kernel mode and
// of a kernel thread, lost samples, perf's round marker, the thread's exit.

const std::vector<uint8_t> kBuildIdProg = ids_of(0x01, 20);
const std::vector<uint8_t> kBuildIdLib = ids_of(0xa0, 16); // a short (16-byte) build id
constexpr uint64_t kProgStart = 0x400000, kProgPgoff = 0x1000, kLibStart = 0x7f0000000000;
constexpr uint64_t kUserIp = 0x401234, kUserSp = 0x7ffd0000, kKernelIp = 0xffffffff81000010;

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(seed + i);
  return v;
}

inline std::vector<std::vector<uint8_t>> recording_records(const TestAttr& a) {
  std::vector<std::vector<uint8_t>> r;
  r.push_back(comm(a, 100, 100, "prog", true, {100, 100, 1000, 101}));
  TestMmap prog{.pid = 100,
                .tid = 100,
                .start = kProgStart,
                .len = 0x2000,
                .pgoff = kProgPgoff,
                .filename = "/nonexistent/ehelf-test/prog",
                .build_id = kBuildIdProg};
  r.push_back(mmap2(a, prog, {100, 100, 1001, 101}));
  TestMmap lib{.pid = 100,
               .tid = 100,
               .start = kLibStart,
               .len = 0x10000,
               .pgoff = 0,
               .maj = 8,
               .min = 1,
               .ino = 1234,
               .filename = "/nonexistent/ehelf-test/libx.so"};
  r.push_back(mmap2(a, lib, {100, 100, 1002, 101}));
  TestMmap data = lib;
  data.start = 0x600000;
  data.len = 0x1000;
  data.prot = 3; // not executable: the unwinder leaves it out
  data.filename = "/nonexistent/ehelf-test/data";
  r.push_back(mmap2(a, data, {100, 100, 1003, 101}));
  r.push_back(task(record_type::kFork, a, 100, 100, 102, 100, {100, 102, 1004, 101}));
  r.push_back(comm(a, 100, 102, "worker", false, {100, 102, 1005, 101}));
  TestSample user;
  user.ip = kUserIp;
  user.pid = 100;
  user.tid = 100;
  user.time = 2000;
  user.period = 4000;
  user.callchain = {kContextUser, kUserIp};
  user.regs = {0x11, 0x22, kUserSp, kUserIp, 0x55};
  user.stack = pattern(64, 7);
  user.dyn_size = 48;
  r.push_back(sample_record(a, kMiscUser, user));
  TestSample kernel;
  kernel.ip = kKernelIp;
  kernel.pid = 100;
  kernel.tid = 102;
  kernel.time = 2001;
  kernel.period = 3999;
  kernel.callchain = {kContextKernel, kKernelIp, kKernelIp + 0x10, kContextUser,
                      kLibStart + 0x1234};
  kernel.regs = {1, 2, kUserSp + 0x100, kLibStart + 0x1234, 5};
  kernel.stack = pattern(32, 9);
  kernel.dyn_size = 1000; // more than was copied: the copy's size is what counts
  r.push_back(sample_record(a, kMiscKernel, kernel));
  r.push_back(lost(a, 101, 7, {100, 102, 2002, 101}));
  r.push_back(finished_round());
  TestSample kthread;
  kthread.ip = kKernelIp + 0x20;
  kthread.time = 2003;
  kthread.period = 4001;
  kthread.callchain = {kContextKernel, kKernelIp + 0x20};
  kthread.regs_abi = 0;
  r.push_back(sample_record(a, kMiscKernel, kthread));
  r.push_back(task(record_type::kExit, a, 100, 100, 102, 100, {100, 102, 3000, 101}));
  TestMmap old{.pid = 100, .tid = 100, .start = 0x500000, .len = 0x1000, .filename = "/old"};
  r.push_back(mmap1(a, old, {100, 100, 3001, 101}));
  return r;
}

inline std::vector<Feature> recording_features(const std::vector<TestAttr>& attrs) {
  std::vector<uint8_t> ids =
      build_id_entry(100, kMiscUser, kBuildIdProg, "/nonexistent/ehelf-test/prog", false);
  std::vector<uint8_t> lib =
      build_id_entry(100, kMiscUser, kBuildIdLib, "/nonexistent/ehelf-test/libx.so", true);
  std::vector<uint8_t> kernel = build_id_entry(static_cast<uint32_t>(-1), kMiscKernel,
                                               ids_of(0x40, 20), "[kernel.kallsyms]", true);
  ids.insert(ids.end(), lib.begin(), lib.end());
  ids.insert(ids.end(), kernel.begin(), kernel.end());
  return {{kFeatBuildId, ids},
          {kFeatHostname, feature_string("testhost")},
          {kFeatOsRelease, feature_string("6.1.0-test")},
          {kFeatArch, feature_string("x86_64")},
          {kFeatEventDesc, event_desc(attrs)}};
}

inline Built recording(bool pipe) {
  const std::vector<TestAttr> attrs{dwarf_attr()};
  const auto records = recording_records(attrs[0]);
  const auto features = recording_features(attrs);
  return pipe ? pipe_layout(attrs, records, features) : file_layout(attrs, records, features);
}

// Two events told apart by PERF_SAMPLE_IDENTIFIER (or, with `identifier` false, PERF_SAMPLE_ID):
// cpu-clock with callchains, and cycles without, which also records the cpu.
inline std::vector<TestAttr> two_attrs(bool identifier) {
  const uint64_t id_bit = identifier ? kIdentifier : kId;
  TestAttr a = dwarf_attr();
  a.sample_type |= id_bit;
  a.ids = {11, 12};
  a.name = "cpu-clock";
  TestAttr b = dwarf_attr();
  b.type = 0; // PERF_TYPE_HARDWARE
  b.config = 0;
  // With PERF_SAMPLE_ID the trailers' id is found from their end: the cpu field would move it.
  b.sample_type = (kDwarfSampleType & ~kCallchain) | id_bit | (identifier ? kCpu : 0);
  b.ids = {21, 22};
  b.name = "cycles";
  b.stack_user = 32;
  return {a, b};
}

inline Built two_event_recording(bool identifier, bool pipe) {
  const std::vector<TestAttr> attrs = two_attrs(identifier);
  const TestAttr &a = attrs[0], &b = attrs[1];
  std::vector<std::vector<uint8_t>> r;
  r.push_back(comm(a, 200, 200, "two", true, {200, 200, 500, 12}));
  TestMmap m{.pid = 200, .tid = 200, .start = kProgStart, .len = 0x1000, .filename = "/nx/two"};
  r.push_back(mmap2(b, m, {200, 200, 501, 21, 3}));
  TestSample s;
  s.id = 12;
  s.ip = kUserIp;
  s.pid = 200;
  s.tid = 201;
  s.time = 600;
  s.period = 10;
  s.callchain = {kContextUser, kUserIp};
  s.regs = {1, 2, kUserSp, kUserIp, 3};
  s.stack = pattern(16, 1);
  s.dyn_size = 16;
  r.push_back(sample_record(a, kMiscUser, s));
  s.id = 21;
  s.time = 601;
  s.period = 20;
  s.cpu = 3;
  s.callchain.clear();
  r.push_back(sample_record(b, kMiscUser, s));
  r.push_back(task(record_type::kExit, b, 200, 200, 201, 200, {200, 201, 700, 22, 1}));
  std::vector<Feature> features{{kFeatEventDesc, event_desc(attrs)}};
  return pipe ? pipe_layout(attrs, r, features) : file_layout(attrs, r, features);
}

// The name the recordings are read under (errors name it).
constexpr const char* kName = "hostile.data";

// perf record -z: the records as one zstd stream, cut into PERF_RECORD_COMPRESSED records at
// `cuts` (offsets in the compressed stream).
inline std::vector<uint8_t> zstd_compress(std::span<const uint8_t> in) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

inline std::vector<std::vector<uint8_t>>
compressed_records(const std::vector<std::vector<uint8_t>>& rs, std::vector<size_t> cuts) {
  std::vector<uint8_t> plain;
  for (const auto& r : rs)
    plain.insert(plain.end(), r.begin(), r.end());
  const std::vector<uint8_t> z = zstd_compress(plain);
  cuts.push_back(z.size());
  std::vector<std::vector<uint8_t>> out;
  size_t from = 0;
  for (size_t cut : cuts) {
    cut = std::min(cut, z.size());
    out.push_back(
        record(record_type::kCompressed, 0, std::span<const uint8_t>(z).subspan(from, cut - from)));
    from = cut;
  }
  return out;
}

// A recording's records and 3,000 samples of two threads in rounds of 100, kernel and user,
// their stack copies one of `stack_kinds` patterns; with `some_without_stack`, every 10th has
// none (named from its call chain).
inline std::vector<std::vector<uint8_t>> many_samples(const TestAttr& a, unsigned stack_kinds,
                                                      bool some_without_stack) {
  std::vector<std::vector<uint8_t>> records = recording_records(a);
  for (uint64_t i = 0; i < 3000; ++i) {
    TestSample smp;
    smp.ip = kUserIp + i % 7;
    smp.pid = 100;
    smp.tid = i % 3 ? 100 : 102;
    smp.time = 5000 + i;
    smp.callchain = {kContextKernel, kKernelIp + i % 5, kContextUser, kLibStart + 0x100 + i % 11};
    smp.regs = {1, 2, kUserSp, kUserIp + i % 7, 5};
    smp.stack = pattern(64, static_cast<uint8_t>(i % stack_kinds));
    smp.dyn_size = 64;
    if (some_without_stack && i % 10 == 0) {
      smp.regs_abi = 0;
      smp.stack.clear();
    }
    records.push_back(sample_record(a, i % 2 ? kMiscKernel : kMiscUser, smp));
    if (i % 100 == 99) records.push_back(finished_round());
  }
  return records;
}

} // namespace
} // namespace ehelf::perf
