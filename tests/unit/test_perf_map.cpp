// PerfMap: the /tmp/perf-PID.map files JIT compilers write (start, size, name per line), later
// lines replacing what they overlap.
#include <gtest/gtest.h>

#include "perf/perf_map.hpp"

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
