// RowLookup (rows found on demand through .eh_frame_hdr) against the whole-module path
// (parse_cfi_section + CfaInterpreter into an UnwindTable, itself checked against readelf -wF).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dwarf/module_cfi.hpp"
#include "dwarf/row_lookup.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

struct Loaded {
  ModuleCfi cfi;
  UnwindTable table;
  RowLookup lookup;
};

// The module's CfiImage from its section headers.
bool image_of(const ElfFile& elf, CfiImage& img) {
  const Section* hdr = elf.find_section(".eh_frame_hdr");
  const Section* eh = elf.find_section(".eh_frame");
  if (!hdr || !eh) return false;
  auto h = elf.section_data(*hdr);
  auto e = elf.section_data(*eh);
  if (!h || !e) return false;
  img = CfiImage{*h, hdr->addr, *e, eh->addr};
  return true;
}

std::unique_ptr<Loaded> load(const std::string& path) {
  auto out = std::make_unique<Loaded>();
  LoadOptions lo;
  lo.debug_frame = false;
  auto cfi = load_module_cfi(path, lo);
  if (!cfi) return nullptr;
  out->cfi = std::move(*cfi);
  auto table = build_unwind_table(out->cfi);
  if (!table) return nullptr;
  out->table = std::move(*table);
  CfiImage img;
  if (!image_of(*out->cfi.elf, img) || !out->lookup.init(img)) return nullptr;
  return out;
}

std::span<const uint8_t> bytes_of(const UnwindTable& t, uint32_t expr) {
  return std::span<const uint8_t>(t.expression(expr).bytes());
}

// Equal up to the registers the runtime tracks, expressions compared by their bytes.
::testing::AssertionResult same_row(const UnwindTable& t, RowView want, const FoundRow& got) {
  if (want.cfa.kind != got.cfa.kind || want.cfa.reg != got.cfa.reg ||
      want.cfa.offset != got.cfa.offset)
    return ::testing::AssertionFailure() << "CFA rule differs";
  if (want.cfa.kind == CfaRule::Kind::Expression) {
    auto a = bytes_of(t, want.cfa.expr);
    auto b = got.expressions[got.cfa.expr];
    if (!std::equal(a.begin(), a.end(), b.begin(), b.end()))
      return ::testing::AssertionFailure() << "CFA expression differs";
  }
  std::vector<ColumnRule> tracked;
  for (const ColumnRule& c : want.columns)
    if (c.column < FoundRow::kColumns) tracked.push_back(c);
  if (tracked.size() != got.count)
    return ::testing::AssertionFailure()
           << "column count " << got.count << ", want " << tracked.size();
  for (size_t i = 0; i < tracked.size(); ++i) {
    const ColumnRule& w = tracked[i];
    const ColumnRule& g = got.columns[i];
    if (w.column != g.column || w.rule.kind != g.rule.kind || w.rule.reg != g.rule.reg ||
        w.rule.offset != g.rule.offset)
      return ::testing::AssertionFailure() << "rule of column " << w.column << " differs";
    if (w.rule.expr != kNoExpression) {
      auto a = bytes_of(t, w.rule.expr);
      auto b = got.expressions[g.rule.expr];
      if (!std::equal(a.begin(), a.end(), b.begin(), b.end()))
        return ::testing::AssertionFailure() << "expression of column " << w.column << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

// Every range's first and last address, and the address after each range that the next does
// not start at (no FDE: NoEntry), looked up both ways.
void compare_everywhere(const std::string& path, size_t at_least = 1000) {
  SCOPED_TRACE(path);
  auto m = load(path);
  ASSERT_TRUE(m) << "cannot load " << path;
  const UnwindTable& t = m->table;
  size_t checked = 0;
  auto ranges = t.ranges();
  for (size_t i = 0; i < ranges.size(); ++i) {
    const TableRange& r = ranges[i];
    const FunctionInfo& fn = t.function(r.function);
    for (uint64_t pc : {r.begin, r.end - 1}) {
      FoundRow got;
      ASSERT_EQ(m->lookup.find(pc, got), RowStatus::Found) << std::hex << pc;
      ASSERT_TRUE(same_row(t, t.row(r.row), got)) << std::hex << "at " << pc;
      ASSERT_EQ(got.function.pc_begin, fn.pc_begin);
      ASSERT_EQ(got.function.pc_end, fn.pc_end);
      ASSERT_EQ(got.function.fde_offset, fn.fde_offset);
      ASSERT_EQ(got.function.lsda, fn.lsda);
      ASSERT_EQ(got.function.signal_frame, fn.signal_frame);
      ASSERT_EQ(got.function.return_column, fn.return_column);
      // The table joins adjacent equal rows: its range holds the lookup's.
      ASSERT_LE(r.begin, got.begin);
      ASSERT_LE(got.begin, pc);
      ASSERT_LT(pc, got.end);
      ASSERT_LE(got.end, r.end);
      ++checked;
    }
    if (i + 1 == ranges.size() || ranges[i + 1].begin != r.end) {
      FoundRow got;
      EXPECT_EQ(m->lookup.find(r.end, got), RowStatus::NoEntry) << std::hex << r.end;
    }
  }
  EXPECT_GE(checked, at_least);
  ::testing::Test::RecordProperty("checked", static_cast<int>(checked));
}

TEST(RowLookup, SameRowsAsTheTableForLibc) {
  compare_everywhere(test::libc_path());
}
TEST(RowLookup, SameRowsAsTheTableForLibstdcxx) {
  compare_everywhere("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
}
TEST(RowLookup, SameRowsAsTheTableForLdSoAndLibm) {
  compare_everywhere("/usr/lib64/ld-linux-x86-64.so.2");
  compare_everywhere("/usr/lib/x86_64-linux-gnu/libm.so.6");
}
TEST(RowLookup, SameRowsAsTheTableForFixtures) {
  for (const char* name : {"recursion", "exceptions", "cfi_variety_hdr", "stack_target"})
    compare_everywhere(std::string(EHELF_FIXTURE_DIR) + "/" + name, 10);
}

TEST(RowLookup, RefusesHeadersItCannotSearch) {
  auto m = load(test::libc_path());
  ASSERT_TRUE(m);
  CfiImage img = m->lookup.image();
  RowLookup l;
  CfiImage wrong_frame = img;
  wrong_frame.eh_frame_addr += 8; // the header's eh_frame_ptr no longer matches
  EXPECT_FALSE(l.init(wrong_frame));
  std::vector<uint8_t> hdr(img.hdr.begin(), img.hdr.end());
  CfiImage copy = img;
  copy.hdr = hdr;
  hdr[3] = 0x1b; // pcrel|sdata4 table entries: not binary-searchable as datarel
  EXPECT_FALSE(l.init(copy));
  hdr[3] = 0x3b;
  copy.hdr = std::span<const uint8_t>(hdr).first(12); // a count larger than the table
  EXPECT_FALSE(l.init(copy));
  FoundRow row;
  EXPECT_EQ(l.find(img.eh_frame_addr, row), RowStatus::NoEntry);
}

// Every single-byte change of a real library's .eh_frame_hdr and of the entries its lookups
// read: each lookup returns a status, never reads outside the spans (ASan), never loops.
TEST(RowLookup, CorruptedBytesNeverEscapeTheirSpans) {
  auto m = load(test::libc_path());
  ASSERT_TRUE(m);
  const CfiImage img = m->lookup.image();
  // A window of .eh_frame around the FDE of one function, copied so that it can be changed.
  const TableRange& r = m->table.ranges()[m->table.ranges().size() / 2];
  FoundRow row;
  ASSERT_EQ(m->lookup.find(r.begin, row), RowStatus::Found);
  std::vector<uint8_t> frame(img.eh_frame.begin(), img.eh_frame.end());
  std::vector<uint8_t> hdr(img.hdr.begin(), img.hdr.end());
  CfiImage copy{hdr, img.hdr_addr, frame, img.eh_frame_addr};
  const uint64_t fde = row.function.fde_offset;
  size_t found = 0;
  for (uint64_t at = fde; at < fde + 64 && at < frame.size(); ++at)
    for (uint8_t v : {uint8_t{0}, uint8_t{0x7f}, uint8_t{0xff}, uint8_t(frame[at] ^ 0x40)}) {
      const uint8_t saved = frame[at];
      frame[at] = v;
      RowLookup l;
      ASSERT_TRUE(l.init(copy));
      FoundRow got;
      found += l.find(r.begin, got) == RowStatus::Found;
      frame[at] = saved;
    }
  for (size_t at = 0; at < 64 && at < hdr.size(); ++at) {
    const uint8_t saved = hdr[at];
    hdr[at] = static_cast<uint8_t>(saved ^ 0xa5);
    RowLookup l;
    if (l.init(copy)) {
      FoundRow got;
      (void)l.find(r.begin, got);
    }
    hdr[at] = saved;
  }
  EXPECT_GT(found, 0u);
}

} // namespace
} // namespace ehelf
