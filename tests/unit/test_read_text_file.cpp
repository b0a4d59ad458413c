// read_text_file: the one bounded whole-file reader behind kallsyms copies, JIT perf maps and
// /proc files.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/read_text_file.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

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

} // namespace
} // namespace ehelf
