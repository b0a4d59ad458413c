// TableBuilder (bpf/table_builder.hpp): a file a process maps is built ahead of files preloaded
// on speculation, also one promoted to wanted while queued; every job is built once and its
// descriptor closed. The files are the system libraries this test runs with.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "bpf/table_builder.hpp"

namespace ehelf::bpf {
namespace {

// The path of the library this process maps whose name holds `part`, or "".
std::string mapped_library(const std::string& part) {
  struct Search {
    std::string part, found;
  } search{part, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (s->found.empty() && name.find(s->part) != std::string::npos) s->found = name;
        return 0;
      },
      &search);
  return search.found;
}

TableBuilder::Job job_for(const std::string& path, uint64_t serial, bool wanted) {
  TableBuilder::Job job;
  job.serial = serial;
  job.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (job.fd >= 0 && ::fstat(job.fd, &st) == 0) {
    job.key.dev = st.st_dev;
    job.key.ino = st.st_ino;
    job.key.size = uint64_t(st.st_size);
  }
  job.policy.compiled = false;
  job.policy.compact = false;
  job.wanted = wanted;
  return job;
}

// The serials of `count` builds in the order they finished.
std::vector<uint64_t> finished(TableBuilder& builder, size_t count) {
  std::vector<uint64_t> order;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (order.size() < count && std::chrono::steady_clock::now() < limit) {
    pollfd ready{builder.fd(), POLLIN, 0};
    ::poll(&ready, 1, 100);
    for (const TableBuilder::Done& d : builder.take()) {
      EXPECT_TRUE(d.table.elf) << d.serial;
      order.push_back(d.serial);
    }
  }
  return order;
}

size_t position(const std::vector<uint64_t>& order, uint64_t serial) {
  return size_t(std::find(order.begin(), order.end(), serial) - order.begin());
}

struct Libraries {
  std::string big = mapped_library("libstdc++"), libc = mapped_library("libc.so"),
              libm = mapped_library("libm.so"), small = mapped_library("ld-linux");
  bool found() const { return !big.empty() && !libc.empty() && !libm.empty() && !small.empty(); }
};

// The files submitted in turn (serials 1, 2, ...; each wanted or speculative), the job of serial
// `promoted` then wanted (0: none): the serials in the order their builds finished.
std::vector<uint64_t> build_order(const std::vector<std::pair<std::string, bool>>& files,
                                  uint64_t promoted = 0) {
  TableBuilder builder;
  uint64_t serial = 0;
  for (const auto& [path, wanted] : files)
    builder.submit(job_for(path, ++serial, wanted));
  if (promoted) builder.want(promoted);
  return finished(builder, serial);
}

class TableBuilderOrder : public ::testing::Test {
protected:
  void SetUp() override {
    if (!lib.found()) GTEST_SKIP() << "libstdc++, libc, libm or ld.so not mapped here";
  }
  Libraries lib;
};

// Speculative builds run one at a time on one thread: the wanted file, submitted last, is built
// on the other beside at most one of them, and at most that one finishes before it (a single
// queue in order built it last: the failure this guards). Which one runs beside it depends on
// when the threads start: the first submitted, or, when all four are queued before a thread
// looks, the smallest (libm), which may then finish first (a CI run under ASan: libm, then the
// wanted file).
TEST_F(TableBuilderOrder, WantedFileIsNotQueuedBehindSpeculativeOnes) {
  const std::vector<uint64_t> order =
      build_order({{lib.big, false}, {lib.libc, false}, {lib.libm, false}, {lib.small, true}});
  ASSERT_EQ(order.size(), 4u);
  EXPECT_LE(position(order, 4), 1u);
}

// A queued speculative job a process now maps is built ahead of the speculative ones before it.
TEST_F(TableBuilderOrder, PromotedJobGoesAheadOfSpeculativeOnes) {
  const std::vector<uint64_t> order =
      build_order({{lib.big, false}, {lib.libc, false}, {lib.small, false}}, /*promoted=*/3);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_LT(position(order, 3), position(order, 2));
}

// Among wanted files the smaller is built first: with both threads busy on large ones, a small
// file submitted after a large one finishes before it.
TEST_F(TableBuilderOrder, SmallerWantedFileFirst) {
  const std::vector<uint64_t> order =
      build_order({{lib.big, true}, {lib.big, true}, {lib.libc, true}, {lib.small, true}});
  ASSERT_EQ(order.size(), 4u);
  EXPECT_LT(position(order, 4), position(order, 3));
}

} // namespace
} // namespace ehelf::bpf
