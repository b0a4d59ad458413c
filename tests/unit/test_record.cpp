// The parts of `ehelf record` that run without perf events: the ring buffer reader (records in
// order, a record wrapping around the end handed out whole, hostile sizes), the profile's
// aggregation, and the output format chosen from flags and file names. The whole command runs on
// real processes in tests/scripts/test_record.sh.
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <vector>

#include "perf/perf_map.hpp"
#include "record/output.hpp"
#include "record/profile.hpp"
#include "record/ring_buffer.hpp"
#include "support/read_text_file.hpp"

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

TEST(Output, FormatFromFlagOrExtension) {
  EXPECT_EQ(*profile_format("", "x.svg"), ProfileFormat::Svg);
  EXPECT_EQ(*profile_format("", "x.pb.gz"), ProfileFormat::Pprof);
  EXPECT_EQ(*profile_format("", "x.pprof"), ProfileFormat::Pprof);
  EXPECT_EQ(*profile_format("", "x.folded"), ProfileFormat::Folded);
  EXPECT_EQ(*profile_format("", "x.txt"), ProfileFormat::Folded);
  EXPECT_EQ(*profile_format("script", "x.txt"), ProfileFormat::Script);
  EXPECT_EQ(*profile_format("svg", "x.folded"), ProfileFormat::Svg);
  EXPECT_FALSE(profile_format("bogus", "x.svg"));
  // In any case; the file's extension, not a directory's.
  EXPECT_EQ(*profile_format("", "x.SVG"), ProfileFormat::Svg);
  EXPECT_EQ(*profile_format("", "out/PROF.PB.GZ"), ProfileFormat::Pprof);
  EXPECT_EQ(*profile_format("", "x.Folded"), ProfileFormat::Folded);
  // An extension no format has is refused, naming the file, unless -f says the format.
  for (const char* path : {"prof.json", "x.html", "x.svgz", "x", "graphs.svg/x", "x.svg.bak"}) {
    auto format = profile_format("", path);
    ASSERT_FALSE(format) << path;
    EXPECT_NE(format.error().message.find(path), std::string::npos) << format.error().message;
  }
  EXPECT_EQ(*profile_format("folded", "prof.json"), ProfileFormat::Folded);
}

} // namespace
} // namespace ehelf::record

namespace ehelf::perf {
namespace {

TEST(PerfMap, ParsesLinesAndLetsLaterOnesWin) {
  const PerfMap map = PerfMap::parse("1000 100 first function\n"
                                     "0x2000 0x10 second\r\n"
                                     "garbage line\n"
                                     "3000 0 empty\n"
                                     "1080 10 newer\n"
                                     "ffffffffffffff00 200 wraps\n"
                                     "4000 10\n");
  ASSERT_NE(map.find(0x1000), nullptr);
  EXPECT_EQ(map.find(0x1000)->name, "first function");
  EXPECT_EQ(map.find(0x1085)->name, "newer"); // replaced the middle of "first function"
  EXPECT_EQ(map.find(0x1095)->name, "first function");
  EXPECT_EQ(map.find(0x10ff)->name, "first function");
  EXPECT_EQ(map.find(0x1100), nullptr);
  EXPECT_EQ(map.find(0x200f)->name, "second");
  EXPECT_EQ(map.find(0x3000), nullptr); // size 0
  EXPECT_EQ(map.find(0xffffffffffffff10), nullptr);
  EXPECT_EQ(map.find(0x4000), nullptr); // no name
}

} // namespace
} // namespace ehelf::perf

#include "perf/kernel_symbols.hpp"
#include "test_support.hpp"
#include <cctype>
#include <charconv>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <sys/stat.h>

namespace ehelf::perf {
namespace {

TEST(KernelSymbols, CodeSymbolsByAddressWithTheirOffsets) {
  const KernelSymbols k = KernelSymbols::parse(std::string("ffffffff81000200 T second\n"
                                                           "ffffffff81000100 t first\n"
                                                           "ffffffff81000180 D data_not_code\n"
                                                           "0000000000000000 T hidden\n"
                                                           "ffffffffc0000000 t mod_fn\t[mod]\n"
                                                           "ffffffff81000200 W alias_later\n"
                                                           "ffffffff81000300 T ends_so]\n"
                                                           "garbage\n"));
  std::string_view name;
  uint64_t offset = 0;
  ASSERT_TRUE(k.name(0xffffffff81000150, name, offset));
  EXPECT_EQ(name, "first"); // the data symbol between is not code
  EXPECT_EQ(offset, 0x50u);
  ASSERT_TRUE(k.name(0xffffffff81000200, name, offset));
  EXPECT_EQ(name, "alias_later"); // equal addresses: the last listed, as before
  ASSERT_TRUE(k.name(0xffffffffc0000010, name, offset));
  EXPECT_EQ(name, "mod_fn");
  ASSERT_TRUE(k.name(0xffffffff81000300, name, offset));
  EXPECT_EQ(name, "ends_so]"); // a ']' at the end but no module before it
  EXPECT_FALSE(k.name(0xffffffff81000000, name, offset));
}

// Addresses are read 8 digits at a time when a line starts with 16 hex digits (the high 8 once for
// the lines that share them), else digit by digit: both as the digits say (std::from_chars as the
// reference), in either case, and a line whose address has a non-digit is skipped. Random lines,
// then the running kernel's own list.
TEST(KernelSymbols, AddressesAsTheirDigitsSay) {
  std::mt19937_64 rng(15);
  const std::string alphabet = "0123456789abcdefABCDEF0123456789abcdefgG:/@`\x7f\x80 ";
  std::string text;
  std::map<uint64_t, std::string> expected; // address -> name (the last listed)
  size_t accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    // Half the lines share their high half, as kallsyms' do (the parser converts it once).
    std::string addr = rng() % 2 ? "ffffffff" : "";
    const size_t length = rng() % 4 == 0 ? 1 + rng() % 17 : 16;
    while (addr.size() < length)
      addr +=
          rng() % 8 == 0 ? alphabet[rng() % alphabet.size()] : "0123456789abcdefABCDEF"[rng() % 22];
    const std::string name = "n" + std::to_string(i);
    text += addr + " T " + name + "\n";
    // The reference: the longest run of hex digits (16 at most), then " T ".
    size_t digits = 0;
    while (digits < addr.size() && digits < 16 &&
           std::isxdigit(static_cast<unsigned char>(addr[digits])))
      ++digits;
    uint64_t value = 0;
    std::from_chars(addr.data(), addr.data() + digits, value, 16);
    if (digits == 0 || value == 0 || digits != addr.size()) continue;
    expected[value] = name;
    ++accepted;
  }
  const KernelSymbols k = KernelSymbols::parse(std::string(text));
  for (const auto& [addr, name] : expected) {
    std::string_view got;
    uint64_t offset = 1;
    ASSERT_TRUE(k.name(addr, got, offset)) << std::hex << addr;
    EXPECT_EQ(got, name);
    EXPECT_EQ(offset, 0u);
  }
  EXPECT_EQ(k.size(), accepted); // and no other line
  // The running kernel's list, where readable with addresses: every code symbol at its address.
  const std::optional<std::string> proc = read_text_file("/proc/kallsyms", 64 << 20);
  if (!proc) {
    GTEST_SKIP() << "/proc/kallsyms unreadable";
  }
  const KernelSymbols live = KernelSymbols::parse(std::string(*proc));
  std::istringstream lines(*proc);
  std::string line;
  size_t checked = 0;
  std::map<uint64_t, std::string> last;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string addr, type, name;
    if (!(fields >> addr >> type >> name) || addr.size() != 16) continue;
    if (type != "t" && type != "T" && type != "w" && type != "W") continue;
    uint64_t value = 0;
    std::from_chars(addr.data(), addr.data() + addr.size(), value, 16);
    if (value) last[value] = name;
  }
  for (const auto& [addr, name] : last) {
    std::string_view got;
    uint64_t offset = 1;
    ASSERT_TRUE(live.name(addr, got, offset));
    EXPECT_EQ(got, name);
    EXPECT_EQ(offset, 0u);
    ++checked;
  }
  if (checked == 0) {
    GTEST_SKIP() << "/proc/kallsyms hides its addresses (kptr_restrict)";
  }
}

// A recording's kernel names come from perf record's copy of its kallsyms in the build-id cache
// when there is one (as perf script reads them), else from /proc/kallsyms of the same release.
// The one bounded whole-file reader behind kallsyms copies, JIT perf maps and /proc files.
TEST(ReadTextFile, RegularAndProcFilesBoundedAndNothingElse) {
  test::TempDir dir;
  const std::filesystem::path file = dir.path / "text";
  const std::string text(5000, 'x');
  test::write_file(file, std::vector<uint8_t>(text.begin(), text.end()));
  EXPECT_EQ(read_text_file(file.string(), 5000), text);
  EXPECT_EQ(read_text_file(file.string(), 4999), std::nullopt); // larger than the bound
  EXPECT_EQ(read_text_file(file.string(), 5000, 0, [](const struct stat&) { return false; }),
            std::nullopt); // refused by the caller's check
  // /proc files say size 0 and are read to their end all the same; past the bound: nothing.
  const std::optional<std::string> status = read_text_file("/proc/self/status", 1 << 20);
  ASSERT_TRUE(status);
  EXPECT_NE(status->find("\nPid:"), std::string::npos);
  EXPECT_EQ(read_text_file("/proc/self/status", 64), std::nullopt);
  // A FIFO is never opened for reading (no writer: it would block), a directory is no file, a
  // symbolic link is refused with O_NOFOLLOW, and a missing file is nothing.
  ASSERT_EQ(::mkfifo((dir.path / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(read_text_file((dir.path / "fifo").string(), 1 << 20), std::nullopt);
  EXPECT_EQ(read_text_file(dir.path.string(), 1 << 20), std::nullopt);
  std::filesystem::create_symlink(file, dir.path / "link");
  EXPECT_EQ(read_text_file((dir.path / "link").string(), 1 << 20), text);
  EXPECT_EQ(read_text_file((dir.path / "link").string(), 1 << 20, O_NOFOLLOW), std::nullopt);
  EXPECT_EQ(read_text_file((dir.path / "missing").string(), 1 << 20), std::nullopt);
}

TEST(KernelSymbols, RecordedCopyInTheBuildIdCacheFirst) {
  test::TempDir dir;
  const std::vector<uint8_t> id = {0xab, 0x01, 0xff};
  const std::filesystem::path copy = dir.path / "[kernel.kallsyms]" / "ab01ff";
  std::filesystem::create_directories(copy);
  const std::string text = "ffffffff81000100 T from_the_copy\n";
  test::write_file(copy / "kallsyms", std::vector<uint8_t>(text.begin(), text.end()));
  std::string_view name;
  uint64_t offset = 0;
  // The running kernel's release is never "no such release": only the copy can name anything.
  const KernelSymbols k =
      KernelSymbols::load_for_recording(dir.path.string(), id, "no such release");
  ASSERT_TRUE(k.name(0xffffffff81000108, name, offset));
  EXPECT_EQ(name, "from_the_copy");
  EXPECT_EQ(offset, 8u);
  // Another build id, or no cache: nothing for another release.
  EXPECT_TRUE(KernelSymbols::load_for_recording(dir.path.string(), std::vector<uint8_t>{0xab},
                                                "no such release")
                  .empty());
  EXPECT_TRUE(KernelSymbols::load_for_recording("", id, "no such release").empty());
  // The copy is mapped, not read: its names point into the mapping, which moves with the
  // KernelSymbols (as it is handed from the thread that loads it); a last line without its
  // newline ends at the mapping's end.
  const std::filesystem::path unended = dir.path / "[kernel.kallsyms]" / "ee";
  std::filesystem::create_directories(unended);
  const std::string two = "ffffffff81000100 T first\nffffffff81000200 t last_at_the_end";
  test::write_file(unended / "kallsyms", std::vector<uint8_t>(two.begin(), two.end()));
  KernelSymbols loaded = KernelSymbols::load_for_recording(
      dir.path.string(), std::vector<uint8_t>{0xee}, "no such release");
  const KernelSymbols moved = std::move(loaded);
  ASSERT_TRUE(moved.name(0xffffffff81000210, name, offset));
  EXPECT_EQ(name, "last_at_the_end");
  EXPECT_EQ(offset, 0x10u);
  // A copy of random bytes names nothing (and the running kernel is not the recorded one).
  const std::filesystem::path noise = dir.path / "[kernel.kallsyms]" / "ef";
  std::filesystem::create_directories(noise);
  std::vector<uint8_t> random(1 << 16);
  std::mt19937 rng(7);
  for (uint8_t& b : random)
    b = static_cast<uint8_t>(rng());
  test::write_file(noise / "kallsyms", random);
  EXPECT_TRUE(KernelSymbols::load_for_recording(dir.path.string(), std::vector<uint8_t>{0xef},
                                                "no such release")
                  .empty());
  // A FIFO where the copy should be is not opened for reading (it would block): skipped.
  const std::filesystem::path fifo_dir = dir.path / "[kernel.kallsyms]" / "cd";
  std::filesystem::create_directories(fifo_dir);
  ASSERT_EQ(::mkfifo((fifo_dir / "kallsyms").c_str(), 0600), 0);
  EXPECT_TRUE(KernelSymbols::load_for_recording(dir.path.string(), std::vector<uint8_t>{0xcd},
                                                "no such release")
                  .empty());
}

} // namespace
} // namespace ehelf::perf
