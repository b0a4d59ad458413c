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
      CompactRule want = compact_rule(table->row(r.row), table->function(r.function));
      interpret += want.kind == CompactRule::Interpret;
      for (uint64_t pc : {r.begin, r.begin + (r.end - r.begin) / 2, r.end - 1})
        ASSERT_EQ(compact.lookup(pc), want) << path << " pc " << std::hex << pc;
      if (prev_end && r.begin > prev_end) {
        EXPECT_EQ(compact.lookup(prev_end).kind, CompactRule::NoEntry) << std::hex << prev_end;
      }
      prev_end = r.end;
    }
    EXPECT_EQ(compact.lookup(table->ranges().front().begin - 1).kind, CompactRule::NoEntry);
    EXPECT_EQ(compact.lookup(prev_end).kind, CompactRule::NoEntry);
    // Almost every row of a compiler-generated library has the compact form.
    EXPECT_LT(interpret, table->ranges().size() / 100) << path;
    RecordProperty("compact_bytes", std::to_string(compact.memory_bytes()));
  }
}

} // namespace
} // namespace ehelf
