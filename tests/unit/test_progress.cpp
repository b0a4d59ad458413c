// The delayed progress bar (ehelf perf on a terminal): nothing for the first second, then the
// bar at most ten times a second, erased at the end; nothing at all when disabled.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/progress.hpp"

namespace ehelf {
namespace {

TEST(DelayedProgress, DrawnOnlyAfterASecondAndErased) {
  testing::internal::CaptureStderr();
  {
    DelayedProgress p("job", "records", true);
    p.update(1, 10); // at once: a short run prints nothing
    EXPECT_FALSE(p.shown());
    std::this_thread::sleep_for(std::chrono::milliseconds(1050));
    p.update(5, 10);
    EXPECT_TRUE(p.shown());
    p.update(6, 10); // within 100 ms of the last: not redrawn
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("1/10"), std::string::npos);
  EXPECT_NE(err.find("\rjob: [####################....................] 5/10 records"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("6/10"), std::string::npos);
  EXPECT_EQ(err.substr(err.size() - 4), "\r\033[K"); // erased when destroyed
}

TEST(DelayedProgress, NothingWhenDisabled) {
  testing::internal::CaptureStderr();
  {
    DelayedProgress p("job", "records", false);
    std::this_thread::sleep_for(std::chrono::milliseconds(1050));
    p.update(5, 10);
    EXPECT_FALSE(p.shown());
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

} // namespace
} // namespace ehelf
