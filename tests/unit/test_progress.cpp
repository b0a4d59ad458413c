// The delayed progress bar (ehelf perf on a terminal): nothing for the first second, then the
// bar at most ten times a second, erased at the end; nothing at all when disabled. The time is
// the test's own clock, moved by hand: no test sleeps.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/progress.hpp"

namespace ehelf {
namespace {

using namespace std::chrono_literals;

// The clock the bars below read: set by the tests.
DelayedProgress::Clock::time_point test_time{};
DelayedProgress::Clock::time_point test_now() {
  return test_time;
}

TEST(DelayedProgress, DrawnOnlyAfterASecondAndErased) {
  test_time = {};
  testing::internal::CaptureStderr();
  {
    DelayedProgress p("job", "records", true, &test_now);
    p.update(1, 10); // at once: a short run prints nothing
    test_time += 999ms;
    p.update(2, 10); // still within the first second
    EXPECT_FALSE(p.shown());
    test_time += 51ms;
    p.update(5, 10);
    EXPECT_TRUE(p.shown());
    test_time += 99ms;
    p.update(6, 10); // within 100 ms of the last: not redrawn
    test_time += 1ms;
    p.update(7, 10); // 100 ms after the last: redrawn
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("1/10"), std::string::npos);
  EXPECT_EQ(err.find("2/10"), std::string::npos);
  EXPECT_NE(err.find("\rjob: [####################....................] 5/10 records"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("6/10"), std::string::npos);
  EXPECT_NE(err.find("\rjob: [############################............] 7/10 records"),
            std::string::npos)
      << err;
  ASSERT_GE(err.size(), 4u);
  EXPECT_EQ(err.substr(err.size() - 4), "\r\033[K"); // erased when destroyed
}

TEST(DelayedProgress, NothingWhenDisabled) {
  test_time = {};
  testing::internal::CaptureStderr();
  {
    DelayedProgress p("job", "records", false, &test_now);
    test_time += 1050ms;
    p.update(5, 10);
    EXPECT_FALSE(p.shown());
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

} // namespace
} // namespace ehelf
