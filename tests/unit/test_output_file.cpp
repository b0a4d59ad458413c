// OutputFile (support/output_file.hpp) on a real file system, with stat as the oracle, and the
// exceptions that worker threads hand back to their caller (parallel_for, ConsumerThread)
// instead of ending the process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "support/batch_queue.hpp"
#include "support/output_file.hpp"
#include "support/worker_pool.hpp"

namespace ehelf {
namespace {

class OutputFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ehelf-output-file-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  // The names in the directory, "." and ".." aside.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          names.push_back(e->d_name);
      ::closedir(d);
    }
    return names;
  }
  static std::string contents(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
};

TEST_F(OutputFileTest, AppearsOnlyWhenCommitted) {
  const std::string path = dir_ + "/out";
  {
    auto out = OutputFile::create(path);
    ASSERT_TRUE(out) << out.error().to_string();
    ASSERT_TRUE(out->write("partial"));
    EXPECT_EQ(entries().size(), 1u); // the temporary
  }
  EXPECT_TRUE(entries().empty()) << "an uncommitted output leaves nothing behind";

  auto out = OutputFile::create(path);
  ASSERT_TRUE(out);
  out->stream() << "streamed " << 42;
  ASSERT_TRUE(out->write(" and written"));
  ASSERT_TRUE(out->commit());
  EXPECT_EQ(contents(path), "streamed 42 and written");
  EXPECT_EQ(entries(), std::vector<std::string>{"out"});
}

TEST_F(OutputFileTest, ModeHasNoSetuidBitsAndHonoursTheUmask) {
  const mode_t old_umask = ::umask(027);
  const std::string path = dir_ + "/prog";
  Status written = write_output_file(path, "x", {.mode = 06777});
  ::umask(old_umask);
  ASSERT_TRUE(written) << written.error().to_string();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(OutputFileTest, ReplacesAFileButNotALinkToOne) {
  const std::string target = dir_ + "/target", link = dir_ + "/link";
  std::ofstream(target) << "precious";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  auto refused = write_output_file(link, "new");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().file, link);
  EXPECT_NE(refused.error().message.find("symbolic link"), std::string::npos);
  EXPECT_EQ(contents(target), "precious");

  ASSERT_TRUE(write_output_file(target, "new"));
  EXPECT_EQ(contents(target), "new");
  EXPECT_EQ(entries().size(), 2u); // target and link, no temporary
}

TEST_F(OutputFileTest, AFullDeviceIsAnErrorAtCommit) {
  auto out = OutputFile::create("/dev/full");
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_TRUE(out->is_device());
  out->stream() << std::string(100000, 'x');
  auto committed = out->commit();
  ASSERT_FALSE(committed);
  EXPECT_NE(committed.error().message.find("No space left"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(WorkerExceptions, ParallelForRethrowsOnTheCaller) {
  std::atomic<int> ran{0};
  // Each item takes a millisecond, so that the other worker cannot run through all of them
  // before the failing one (an early item) has thrown.
  EXPECT_THROW(parallel_for(1000, 2,
                            [&](unsigned, size_t item) {
                              ++ran;
                              if (item == 3) throw std::runtime_error("item 3");
                              std::this_thread::sleep_for(std::chrono::milliseconds(1));
                            }),
               std::runtime_error);
  EXPECT_LT(ran.load(), 1000) << "items after the failure are not started";
}

struct Numbers {
  size_t count = 0;
  std::vector<int> items;
};

TEST(WorkerExceptions, ConsumerThreadRethrowsAndNeverBlocksTheProducer) {
  BatchQueue<Numbers> queue(2);
  ConsumerThread<Numbers> consumer(queue, [&] {
    while (auto b = queue.pop())
      throw std::runtime_error("consumer failed");
  });
  // Far more batches than the queue holds: a consumer that stopped popping would block this.
  for (int i = 0; i < 100; ++i) {
    auto b = queue.take_spare();
    b->count = 1;
    queue.push(std::move(b));
  }
  EXPECT_THROW(consumer.finish(), std::runtime_error);
}

} // namespace
} // namespace ehelf
