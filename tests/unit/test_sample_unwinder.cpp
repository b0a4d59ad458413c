// SampleUnwinder fed with what the perf.data reader decodes: the recorded processes followed
// (mmaps, forks, exec, kernel samples), a stack copy at the top of the address space, nonsense
// registers and stacks.
#include <gtest/gtest.h>

#include "perf_data_checks.hpp"
#include "record/profile.hpp"
#include "runtime/proc_files.hpp"

namespace ehelf::perf {
namespace {

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

// This process's mapping of libc's code (where getpid is), as an MMAP2 record of process `pid`
// at `time`; the record's file name points into `maps`. Null: not found.
struct LibcMapping {
  uint64_t pc = reinterpret_cast<uint64_t>(&::getpid);
  std::vector<ProcMapping> maps =
      read_proc_maps(::getpid(), /*executable_only=*/true).value_or(std::vector<ProcMapping>{});
  const ProcMapping* libc() const {
    for (const ProcMapping& m : maps)
      if (m.start <= pc && pc < m.end) return &m;
    return nullptr;
  }
  Record record(uint32_t pid, uint64_t time) const {
    const ProcMapping* l = libc();
    Record r;
    r.type = record_type::kMmap2;
    r.time = time;
    MmapRecord m;
    m.pid = m.tid = pid;
    m.start = l->start;
    m.len = l->end - l->start;
    m.pgoff = l->offset;
    m.prot = 5; // PROT_READ | PROT_EXEC
    m.mmap2 = true;
    m.filename = l->path;
    r.body = m;
    return r;
  }
};

// Kernel mode names the stacks the kernel counted as of the side-band records read so far: a
// stack counted in code whose mapping's record was still in a ring is named without it, and,
// once the record is read, again with it (it stayed unnamed for the rest of the run: the maps
// changed in place kept their id, the profile's key of a stack). libc's code as this process
// maps it, for a process 4242.
TEST(SampleUnwinder, AStackNamedBeforeItsMappingsRecordIsNamedAgainAfterIt) {
  const LibcMapping libc;
  ASSERT_NE(libc.libc(), nullptr);
  const uint64_t pc = libc.pc;
  SampleUnwinderOptions options;
  SampleUnwinder u(RecordingInfo{}, options);
  record::Profile profile;
  RawStack raw;
  raw.pid = raw.tid = 4242;
  raw.user = {pc};
  raw.user_walked = true;
  raw.stop = StopReason::EndOfStack;
  u.adopt_raw(raw, 1);
  profile.add_counted(raw, "prog", u, 1, 1, {});
  RawStack ignored;
  EXPECT_FALSE(u.feed_raw(libc.record(4242, 0), ignored));
  u.adopt_raw(raw, 2);
  profile.add_counted(raw, "prog", u, 2, 2, {});
  ASSERT_EQ(profile.distinct_stacks(), 2u);
  std::vector<CountedStack> named = profile.named(u);
  ASSERT_EQ(named.size(), 2u);
  for (const CountedStack& c : named) {
    ASSERT_EQ(c.stack.frames.size(), 1u);
    EXPECT_EQ(c.stack.frames[0].module.empty(), c.samples == 1) << c.stack.frames[0].module;
    if (c.samples == 2) {
      EXPECT_NE(c.stack.frames[0].symbol.find("getpid"), std::string::npos);
    }
  }
}

// Process `pid`'s exec of a program "next" at `time`.
Record exec_record(uint32_t pid, uint64_t time) {
  Record exec;
  exec.type = record_type::kComm;
  exec.time = time;
  exec.body = CommRecord{pid, pid, "next", true};
  return exec;
}

// A process that exec'd another program after a stack was counted in the kernel: the stack is
// named with the first program's maps (its sample came before the exec), not the second's. libc
// as this process maps it, for a process 4343 that maps it, execs at time 2000 and then has no
// mapping there.
TEST(SampleUnwinder, AStackCountedBeforeAnExecIsNamedWithTheMapsBeforeIt) {
  const LibcMapping libc;
  ASSERT_NE(libc.libc(), nullptr);
  const uint64_t pc = libc.pc;
  SampleUnwinder u(RecordingInfo{}, SampleUnwinderOptions{});
  RawStack ignored;
  EXPECT_FALSE(u.feed_raw(libc.record(4343, 1000), ignored));
  EXPECT_FALSE(u.feed_raw(exec_record(4343, 2000), ignored));
  auto name = [&](uint64_t since) {
    RawStack raw;
    raw.pid = raw.tid = 4343;
    raw.user = {pc};
    raw.user_walked = true;
    raw.stop = StopReason::EndOfStack;
    u.adopt_raw(raw, 1, since);
    SampleStack out;
    u.name_stack(u.resolve(raw), "prog", out);
    return out.frames.size() == 1 ? out.frames[0].symbol : std::string("(no frame)");
  };
  EXPECT_NE(name(1500).find("getpid"), std::string::npos); // sampled before the exec
  EXPECT_EQ(name(2500).find("getpid"), std::string::npos); // after it: libc is not mapped
  EXPECT_EQ(name(0).find("getpid"), std::string::npos);    // unknown: the maps of now
}

// The program a process ran at a time, as the records describe it (what ehelf record's kernel
// side keeps for samples that waited while it ended): a process 4444 maps libc (as this process
// maps it, from /proc/self/maps) at time 1000 and forks 4445 at 1500, which execs at 2000.
TEST(SampleUnwinder, ProgramAtATimeIsTheOneThatRanThen) {
  const LibcMapping libc;
  ASSERT_NE(libc.libc(), nullptr);
  SampleUnwinder u(RecordingInfo{}, SampleUnwinderOptions{});
  RawStack ignored;
  EXPECT_FALSE(u.feed_raw(libc.record(4444, 1000), ignored));
  Record fork;
  fork.type = record_type::kFork;
  fork.time = 1500;
  fork.body = TaskRecord{4445, 4444, 4445, 4444, 1500};
  EXPECT_FALSE(u.feed_raw(fork, ignored));
  EXPECT_FALSE(u.feed_raw(exec_record(4445, 2000), ignored));

  const ProcMapping& l = *libc.libc();
  auto is_libc = [&](const SampleUnwinder::Program& p) {
    return p.mappings.size() == 1 && p.mappings[0].path == l.path &&
           p.mappings[0].start == l.start && p.mappings[0].end == l.end &&
           p.mappings[0].offset == l.offset && p.mappings[0].build_id.size() == 40;
  };
  const SampleUnwinder::Program before_exec = u.program_at(4445, 1999);
  EXPECT_TRUE(is_libc(before_exec)); // the parent's mappings, from the fork
  EXPECT_EQ(before_exec.began, 1500u);
  const SampleUnwinder::Program after_exec = u.program_at(4445, 2000);
  EXPECT_TRUE(after_exec.mappings.empty()); // the new program has mapped nothing yet
  EXPECT_EQ(after_exec.began, 2000u);
  const SampleUnwinder::Program parent = u.program_at(4444, 3000);
  EXPECT_TRUE(is_libc(parent));
  EXPECT_EQ(parent.began, 0u); // (its program began before the recording)
  EXPECT_TRUE(u.program_at(4446, 1000).mappings.empty()); // no record of it
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
// Hostile registers.

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
