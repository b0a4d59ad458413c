// The in-kernel walk's user-space parts that need no kernel: the pools its rows and mappings are
// allocated from, and the names of interval files.
#include <gtest/gtest.h>

#include "bpf/range_pool.hpp"
#include "record/output.hpp"

using ehelf::bpf::RangePool;

TEST(RangePool, FirstFitJoinsFreedNeighboursAndGrows) {
  RangePool pool(100);
  auto a = pool.allocate(40), b = pool.allocate(40), c = pool.allocate(20);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->first, 0u);
  EXPECT_EQ(b->first, 40u);
  EXPECT_EQ(c->first, 80u);
  EXPECT_FALSE(pool.allocate(1)); // full
  pool.release(*a);
  pool.release(*c);
  EXPECT_FALSE(pool.allocate(50)); // 40 + 20 free, not together
  pool.release(*b);                // joins both neighbours: 100 together
  auto all = pool.allocate(100);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->first, 0u);
  pool.grow(250); // a new shard: its slots free, after the old ones
  auto more = pool.allocate(150);
  ASSERT_TRUE(more);
  EXPECT_EQ(more->first, 100u);
  EXPECT_FALSE(pool.allocate(1));
  pool.release(*all);
  pool.release(*more);
  auto whole = pool.allocate(250); // freed across the old end: one range again
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->first, 0u);
  EXPECT_EQ(pool.allocate(0)->count, 0u);
}

TEST(IntervalPath, NumberGoesBeforeTheExtension) {
  using ehelf::record::interval_path;
  EXPECT_EQ(interval_path("prof.pb.gz", 1), "prof.0001.pb.gz");
  EXPECT_EQ(interval_path("out/ehelf.svg", 12), "out/ehelf.0012.svg");
  EXPECT_EQ(interval_path("dir.d/stacks", 3), "dir.d/stacks.0003");
  EXPECT_EQ(interval_path("a.folded", 10000), "a.10000.folded");
  EXPECT_EQ(interval_path(".pb.gz", 2), ".pb.0002.gz");
}
