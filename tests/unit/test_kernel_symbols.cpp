// KernelSymbols: the kernel's code symbols from a kallsyms text (/proc/kallsyms, or perf record's
// copy in the build-id cache), by address, with their offsets.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "perf/kernel_symbols.hpp"
#include "support/read_text_file.hpp"
#include "test_support.hpp"

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
