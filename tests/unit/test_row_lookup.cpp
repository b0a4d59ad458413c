// RowLookup (rows found on demand through .eh_frame_hdr) against the whole-module path
// (parse_cfi_section + CfaInterpreter into an UnwindTable, itself checked against readelf -wF).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <sys/mman.h>
#include <vector>

#include "dwarf/module_cfi.hpp"
#include "dwarf/row_lookup.hpp"
#include "runtime/module_map.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

struct Loaded {
  ModuleCfi cfi;
  UnwindTable table;
  RowLookup lookup;
  std::vector<uint8_t> made_hdr; // the search table made from .eh_frame, when asked for
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

// `made_table`: the lookup goes through a search table made from .eh_frame (make_search_table)
// instead of the file's .eh_frame_hdr.
std::unique_ptr<Loaded> load(const std::string& path, bool made_table = false) {
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
  if (made_table) {
    auto made = make_search_table(*out->cfi.elf);
    if (!made) return nullptr;
    out->made_hdr = std::move(made->hdr);
    img = CfiImage{out->made_hdr, made->hdr_addr, made->eh_frame, made->eh_frame_addr};
  } else if (!image_of(*out->cfi.elf, img)) {
    return nullptr;
  }
  if (!out->lookup.init(img)) return nullptr;
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
void compare_everywhere(const std::string& path, size_t at_least = 1000, bool made_table = false) {
  SCOPED_TRACE(path);
  auto m = load(path, made_table);
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

// A module without a usable .eh_frame_hdr (--no-eh-frame-hdr, or a header listing no FDE) is
// searched through a table made from its .eh_frame: the linker's own table where there is one,
// and the same rows through it.
TEST(RowLookup, MadeSearchTableIsTheLinkers) {
  const std::vector<std::string> paths = {test::libc_path(),
                                          "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                          std::string(EHELF_FIXTURE_DIR) + "/exceptions"};
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    auto elf = ElfFile::open(path);
    ASSERT_TRUE(elf);
    const Section* hdr = (*elf)->find_section(".eh_frame_hdr");
    ASSERT_TRUE(hdr);
    auto linkers = parse_eh_frame_hdr(*(*elf)->section_data(*hdr), hdr->addr);
    ASSERT_TRUE(linkers);
    auto made = make_search_table(**elf);
    ASSERT_TRUE(made) << made.error().to_string();
    auto ours = parse_eh_frame_hdr(made->hdr, made->hdr_addr);
    ASSERT_TRUE(ours);
    EXPECT_EQ(ours->eh_frame_ptr, linkers->eh_frame_ptr);
    ASSERT_EQ(ours->table.size(), linkers->table.size());
    for (size_t i = 0; i < ours->table.size(); ++i) {
      EXPECT_EQ(ours->table[i].initial_location, linkers->table[i].initial_location) << i;
      EXPECT_EQ(ours->table[i].fde_address, linkers->table[i].fde_address) << i;
    }
  }
}
TEST(RowLookup, SameRowsThroughAMadeSearchTable) {
  compare_everywhere(test::libc_path(), 1000, true);
  for (const char* name : {"recursion", "exceptions", "cfi_variety_hdr"})
    compare_everywhere(std::string(EHELF_FIXTURE_DIR) + "/" + name, 10, true);
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

// ---- rows of this process's modules, through the page-by-page copy of their loaded bytes ----

namespace ehelf {
namespace {

// libc's .eh_frame_hdr .. end of .eh_frame laid out in anonymous memory as a loaded image would
// hold them (same distances), for a Module whose cfi_* fields point there.
struct FakeImage {
  uint8_t* base = nullptr;
  size_t size = 0;
  Module module;
};

FakeImage map_like_loaded(const Loaded& m) {
  const CfiImage img = m.lookup.image();
  const uint64_t lo = img.hdr_addr, hi = img.eh_frame_addr + img.eh_frame.size();
  FakeImage f;
  f.size = (hi - lo + 4095) & ~size_t(4095);
  void* p = ::mmap(nullptr, f.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return f;
  f.base = static_cast<uint8_t*>(p);
  std::memcpy(f.base, img.hdr.data(), img.hdr.size());
  std::memcpy(f.base + (img.eh_frame_addr - lo), img.eh_frame.data(), img.eh_frame.size());
  f.module.bias = reinterpret_cast<uint64_t>(f.base) - lo;
  f.module.cfi_hdr = reinterpret_cast<uint64_t>(f.base);
  f.module.cfi_hdr_size = img.hdr.size();
  f.module.cfi_segment_end = reinterpret_cast<uint64_t>(f.base) + (hi - lo);
  return f;
}

TEST(LoadedRows, SameRowsAsTheFileThroughThePageCopy) {
  auto m = load(test::libc_path());
  ASSERT_TRUE(m);
  FakeImage f = map_like_loaded(*m);
  ASSERT_TRUE(f.base);
  ModuleData data;
  find_rows_in_memory(f.module, data);
  ASSERT_TRUE(data.has_rows());
  const RowLookup* rows = data.row_lookup();
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows, data.row_lookup()); // made once
  size_t checked = 0;
  for (const TableRange& r : m->table.ranges())
    for (uint64_t pc : {r.begin, r.end - 1}) {
      FoundRow want, got;
      ASSERT_EQ(m->lookup.find(pc, want), RowStatus::Found);
      ASSERT_EQ(rows->find(pc, got), RowStatus::Found) << std::hex << pc;
      ASSERT_TRUE(same_row(m->table, m->table.row(r.row), got));
      ASSERT_EQ(want.function.fde_offset, got.function.fde_offset);
      ++checked;
    }
  EXPECT_GT(checked, 1000u);
  ::munmap(f.base, f.size);
}

TEST(LoadedRows, AnImageUnmappedUnderALookupFailsWithoutFaulting) {
  auto m = load(test::libc_path());
  ASSERT_TRUE(m);
  FakeImage f = map_like_loaded(*m);
  ASSERT_TRUE(f.base);
  ModuleData data;
  find_rows_in_memory(f.module, data);
  const RowLookup* rows = data.row_lookup(); // copies the header's first page only
  ASSERT_TRUE(rows);
  const TableRange& first = m->table.ranges().front();
  FoundRow got;
  ASSERT_EQ(rows->find(first.begin, got), RowStatus::Found);
  ::munmap(f.base, f.size); // dlclose under the walk
  // Pages not copied yet cannot be: every lookup ends in a status, none faults.
  size_t failed = 0;
  for (const TableRange& r : m->table.ranges())
    failed += rows->find(r.begin, got) != RowStatus::Found;
  EXPECT_GT(failed, 0u);
  // Unmapped before the first lookup: no rows at all.
  FakeImage g = map_like_loaded(*m);
  ModuleData gone;
  find_rows_in_memory(g.module, gone);
  ::munmap(g.base, g.size);
  EXPECT_EQ(gone.row_lookup(), nullptr);
}

} // namespace
} // namespace ehelf

namespace ehelf {
namespace {

// The whole table made from found rows (what a loaded image's accelerator is built from) answers
// as the table built from the section, at both ends of every range.
TEST(RowLookup, WholeTableFromRowsEqualsTheSectionsTable) {
  for (const char* path : {test::libc_path(), "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"}) {
    SCOPED_TRACE(path);
    auto m = load(path);
    ASSERT_TRUE(m);
    const std::optional<UnwindTable> whole = m->lookup.whole_table();
    ASSERT_TRUE(whole.has_value());
    const UnwindTable& from_rows = *whole;
    const UnwindTable& t = m->table;
    for (const TableRange& r : t.ranges())
      for (uint64_t pc : {r.begin, r.end - 1}) {
        const TableRange* got = from_rows.find(pc);
        ASSERT_TRUE(got) << std::hex << pc;
        const RowView a = t.row(r.row), b = from_rows.row(got->row);
        ASSERT_EQ(a.cfa.kind, b.cfa.kind);
        ASSERT_EQ(a.cfa.reg, b.cfa.reg);
        ASSERT_EQ(a.cfa.offset, b.cfa.offset);
        if (a.cfa.kind == CfaRule::Kind::Expression) {
          ASSERT_EQ(t.expression(a.cfa.expr).bytes(), from_rows.expression(b.cfa.expr).bytes());
        }
        std::vector<ColumnRule> tracked;
        for (const ColumnRule& c : a.columns)
          if (c.column < FoundRow::kColumns) tracked.push_back(c);
        ASSERT_EQ(tracked.size(), b.columns.size()) << std::hex << pc;
        for (size_t i = 0; i < tracked.size(); ++i) {
          ASSERT_EQ(tracked[i].column, b.columns[i].column);
          ASSERT_EQ(tracked[i].rule.kind, b.columns[i].rule.kind);
          ASSERT_EQ(tracked[i].rule.offset, b.columns[i].rule.offset);
          if (tracked[i].rule.expr != kNoExpression) {
            ASSERT_EQ(t.expression(tracked[i].rule.expr).bytes(),
                      from_rows.expression(b.columns[i].rule.expr).bytes());
          }
        }
        ASSERT_EQ(t.function(r.function).pc_begin, from_rows.function(got->function).pc_begin);
      }
    EXPECT_EQ(from_rows.function_count(), t.function_count());
  }
}

} // namespace
} // namespace ehelf
