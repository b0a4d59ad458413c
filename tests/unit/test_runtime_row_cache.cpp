// Cursor steps (every register evaluated) through rows found in memory: remembered in a RowCache,
// a walk taken again reads every row from it and gives the same registers and save slots at
// every frame as walks without it. (The C library's unw_step runs this step; the speed it buys
// is in bench/run_unwind.sh, the "ehelf C API unw_step loop" row.)
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "runtime/general_step.hpp"
#include "runtime/local.hpp"
#include "runtime/row_cache.hpp"

namespace ehelf {
namespace {

struct Frame {
  RegisterState regs;
  SaveSlots saved;
  uint64_t key = 0;
  bool remembered_before = false; // its row was in the cache before the step
};

// Steps from `regs` until the walk ends, recording each frame's registers after its step.
std::vector<Frame> cursor_walk(GeneralStep& walker, RegisterState regs, RowCache* rows) {
  LocalMemory mem(current_thread_stack());
  SaveSlots saved;
  bool exact = false;
  std::vector<Frame> out;
  for (int i = 0; i < 256; ++i) {
    Frame f;
    f.key = RuleCache::key(regs.get(x86_64::RIP), exact);
    f.remembered_before = rows && rows->find(f.key);
    FrameInfo info;
    if (walker.step_every_register(regs, mem, exact, info, &saved, rows) != StopReason::None) break;
    f.regs = regs;
    f.saved = saved;
    out.push_back(f);
    exact = info.signal_frame;
  }
  return out;
}

// A chain of frames that save callee-saved registers (r12-r15 live across the calls).
__attribute__((noinline)) uint64_t nest(int depth, uint64_t a, uint64_t b, uint64_t c,
                                        std::vector<std::vector<Frame>>& out) {
  if (depth == 0) {
    static ModuleMap map = [] {
      ModuleMap m = ModuleMap::for_self();
      m.load_in_memory(); // rows found on demand in the loaded images, as the C library's
      return m;
    }();
    StepOptions options;
    options.allow_loading = false;
    GeneralStep walker(map, options);
    const RegisterState regs = capture_local();
    RowCache rows;
    out.push_back(cursor_walk(walker, regs, nullptr));
    out.push_back(cursor_walk(walker, regs, &rows)); // fills the cache
    out.push_back(cursor_walk(walker, regs, &rows)); // from the cache
    return a;
  }
  uint64_t x = a * 3 + b, y = b ^ c, z = c + a;
  asm volatile("" : "+r"(x), "+r"(y), "+r"(z));
  const uint64_t r = nest(depth - 1, y, z, x, out);
  asm volatile("" ::: "memory");
  return r + x + y + z;
}

TEST(RuntimeRowCache, CursorStepsFromRememberedRowsEqualStepsFromFoundRows) {
  std::vector<std::vector<Frame>> walks;
  nest(12, 1, 2, 3, walks);
  ASSERT_EQ(walks.size(), 3u);
  const auto& plain = walks[0];
  ASSERT_GT(plain.size(), 14u); // nest's frames, the test's, gtest's, libc's start
  for (size_t w = 1; w < 3; ++w) {
    ASSERT_EQ(walks[w].size(), plain.size()) << "walk " << w;
    for (size_t i = 0; i < plain.size(); ++i) {
      SCOPED_TRACE(testing::Message() << "walk " << w << " frame " << i);
      EXPECT_EQ(walks[w][i].regs.valid, plain[i].regs.valid);
      for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r) {
        if (plain[i].regs.has(r)) {
          EXPECT_EQ(walks[w][i].regs.get(r), plain[i].regs.get(r)) << r;
        }
      }
      EXPECT_EQ(walks[w][i].saved.valid, plain[i].saved.valid);
      for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r) {
        if (plain[i].saved.has(r)) {
          EXPECT_EQ(walks[w][i].saved.address[r], plain[i].saved.address[r]) << r;
        }
      }
    }
  }
  // The walk after the one that filled the cache took every row from it (all of these frames'
  // rows are expression-free: no PLT entry or signal frame on this stack), except where more
  // distinct pcs of this walk than a set has ways fall in one set: with ASLR that happens in
  // about one run in a hundred, and those pcs evict each other by design.
  std::map<size_t, std::set<uint64_t>> keys_per_set;
  for (const Frame& f : walks[2])
    keys_per_set[RowCache::set_of(f.key)].insert(f.key);
  size_t hits = 0, expected = 0;
  for (const Frame& f : walks[2]) {
    hits += f.remembered_before;
    expected += keys_per_set[RowCache::set_of(f.key)].size() <= RowCache::kWays;
    if (keys_per_set[RowCache::set_of(f.key)].size() <= RowCache::kWays) {
      EXPECT_TRUE(f.remembered_before) << std::hex << f.key;
    }
  }
  EXPECT_GE(hits, expected);
  EXPECT_GT(expected, walks[2].size() / 2);
}

// Rows the cache cannot hold as they are are not kept: an expression, an offset over 32 bits.
TEST(RuntimeRowCache, KeepsOnlyRowsItHoldsExactly) {
  FunctionInfo fn;
  ColumnRule ra;
  ra.column = x86_64::RIP;
  ra.rule.kind = RegisterRule::Kind::Offset;
  ra.rule.offset = -8;
  CfaRule cfa;
  cfa.kind = CfaRule::Kind::RegOffset;
  cfa.reg = x86_64::RSP;
  cfa.offset = 16;
  CachedRow row;
  ASSERT_TRUE(CachedRow::from(RowView{cfa, {&ra, 1}}, fn, 42, row));
  EXPECT_EQ(row.key, 42u);
  ColumnRule back[CachedRow::kMaxColumns];
  ASSERT_EQ(row.columns_into(back), 1u);
  EXPECT_EQ(back[0], ra);
  EXPECT_EQ(row.cfa(), cfa);

  ColumnRule wide = ra;
  wide.rule.offset = int64_t(1) << 33;
  EXPECT_FALSE(CachedRow::from(RowView{cfa, {&wide, 1}}, fn, 42, row));
  ColumnRule expr = ra;
  expr.rule.kind = RegisterRule::Kind::Expression;
  expr.rule.expr = 0;
  EXPECT_FALSE(CachedRow::from(RowView{cfa, {&expr, 1}}, fn, 42, row));
  CfaRule cfa_expr = cfa;
  cfa_expr.kind = CfaRule::Kind::Expression;
  EXPECT_FALSE(CachedRow::from(RowView{cfa_expr, {&ra, 1}}, fn, 42, row));
}

} // namespace
} // namespace ehelf
