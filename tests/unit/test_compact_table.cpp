// The compact-table backend answers exactly what the model says, at every range boundary.
#include <gtest/gtest.h>

#include "dwarf/module_cfi.hpp"
#include "runtime/compact_table.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

TEST(CompactTable, AgreesWithTheModelEverywhere) {
  for (const char* path : {test::libc_path(), "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"}) {
    auto m = load_module_cfi(path);
    ASSERT_TRUE(m);
    auto table = build_unwind_table(*m);
    ASSERT_TRUE(table);
    CompactTable compact(*table);
    size_t interpret = 0;
    uint64_t prev_end = 0;
    for (const TableRange& r : table->ranges()) {
      UnwindRule want = to_unwind_rule(table->row(r.row), table->function(r.function));
      interpret += want.kind == UnwindRule::Interpret;
      for (uint64_t pc : {r.begin, r.begin + (r.end - r.begin) / 2, r.end - 1})
        ASSERT_EQ(compact.lookup(pc), want) << path << " pc " << std::hex << pc;
      if (prev_end && r.begin > prev_end) {
        EXPECT_EQ(compact.lookup(prev_end).kind, UnwindRule::NoEntry) << std::hex << prev_end;
      }
      prev_end = r.end;
    }
    EXPECT_EQ(compact.lookup(table->ranges().front().begin - 1).kind, UnwindRule::NoEntry);
    EXPECT_EQ(compact.lookup(prev_end).kind, UnwindRule::NoEntry);
    // Almost every row of a compiler-generated library has the compact form.
    EXPECT_LT(interpret, table->ranges().size() / 100) << path;
    RecordProperty("compact_bytes", std::to_string(compact.memory_bytes()));
  }
}

// A module with more distinct rules than 16-bit rule numbers hold: the rules past the limit are
// answered by the interpreter (Interpret), none is lost to "no entry".
TEST(CompactTable, RulesBeyondTheLimitGoToTheInterpreter) {
  UnwindTable table;
  FunctionInfo fn;
  fn.pc_begin = 0x1000;
  const size_t rows = CompactTable::kMaxRules + 5000;
  fn.pc_end = fn.pc_begin + rows;
  const uint32_t f = table.add_function(fn);
  const ColumnRule ra{x86_64::RIP, RegisterRule{RegisterRule::Kind::Offset, 0, -8, kNoExpression}};
  for (size_t i = 0; i < rows; ++i) {
    const CfaRule cfa{CfaRule::Kind::RegOffset, x86_64::RSP, int64_t(8 + 8 * i), kNoExpression};
    const uint32_t row = table.intern_row(cfa, {&ra, 1});
    table.add_range(TableRange{fn.pc_begin + i, fn.pc_begin + i + 1, row, f, 0});
  }
  table.finish();
  ASSERT_EQ(table.row_count(), rows);
  CompactTable compact(table);
  EXPECT_EQ(compact.rules(), CompactTable::kMaxRules);
  size_t exact = 0, interpreted = 0;
  for (const TableRange& r : table.ranges()) {
    const UnwindRule& got = compact.lookup(r.begin);
    ASSERT_NE(got.kind, UnwindRule::NoEntry) << std::hex << r.begin;
    if (got.kind == UnwindRule::Interpret) {
      ++interpreted;
    } else {
      ASSERT_EQ(got, to_unwind_rule(table.row(r.row), fn));
      ++exact;
    }
  }
  EXPECT_EQ(exact + interpreted, rows);
  EXPECT_GE(interpreted, rows - CompactTable::kMaxRules + 2); // NoEntry and Interpret take two
}

// A range that crosses the compact table's 4 GiB limit (relocatable objects put every FDE at 0;
// Free Pascal's claim 12 GiB): the part below the limit keeps its rule, the rest is not covered
// (the interpreter answers there), and a lookup never reads outside the table.
TEST(CompactTable, ARangeBeyondFourGiBIsCutAtTheLimit) {
  for (uint64_t second_begin : {uint64_t(0x10), uint64_t(0x300000000)}) {
    UnwindTable table;
    FunctionInfo fn;
    fn.pc_begin = 0;
    fn.pc_end = 0x300000000;
    const uint32_t f = table.add_function(fn);
    const ColumnRule ra{x86_64::RIP,
                        RegisterRule{RegisterRule::Kind::Offset, 0, -8, kNoExpression}};
    const CfaRule cfa{CfaRule::Kind::RegOffset, x86_64::RSP, 8, kNoExpression};
    const uint32_t row = table.intern_row(cfa, {&ra, 1});
    table.add_range(TableRange{0, second_begin, row, f, 0});
    const CfaRule cfa2{CfaRule::Kind::RegOffset, x86_64::RSP, 16, kNoExpression};
    table.add_range(TableRange{second_begin, 0x300000000, table.intern_row(cfa2, {&ra, 1}), f, 0});
    table.finish();
    CompactTable compact(table);
    EXPECT_EQ(compact.lookup(0).kind, UnwindRule::CfaRsp);
    EXPECT_EQ(compact.lookup(0).cfa_offset, 8);
    EXPECT_TRUE(compact.covers(0xfffffffe));
    EXPECT_FALSE(compact.covers(0x100000000));
    EXPECT_FALSE(compact.covers(0x2ffffffff));
    EXPECT_EQ(compact.lookup(0x2ffffffff).kind, UnwindRule::NoEntry);
    if (second_begin == 0x10) {
      EXPECT_EQ(compact.lookup(0x20).cfa_offset, 16);
    }
  }
}

} // namespace
} // namespace ehelf
