// The BPF rows (bpf/bpf_rows.hpp) and the user-space twin of the kernel's step (bpf_twin.hpp):
// the oracle on system libraries, fixtures and a program compiled here; the rows against
// readelf's own decoding of the tables (-wF); the PLT and signal rows found and checked; odd
// hand-built tables give STOP rows or a refusal, never a crash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "bpf/bpf_check.hpp"
#include "bpf/bpf_rows.hpp"
#include "bpf/bpf_twin.hpp"
#include "dwarf/module_cfi.hpp"
#include "model/registers.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

UnwindTable table_of(const std::string& path) {
  auto m = load_module_cfi(path);
  EXPECT_TRUE(m) << path << ": " << m.error().to_string();
  if (!m) return {};
  auto table = build_unwind_table(*m);
  EXPECT_TRUE(table) << path << ": " << table.error().to_string();
  return table ? std::move(*table) : UnwindTable{};
}

BpfTable rows_of(const UnwindTable& table) {
  auto rows = encode_bpf_rows(table);
  EXPECT_TRUE(rows) << rows.error().to_string();
  return rows ? std::move(*rows) : BpfTable{};
}

// The row covering `addr`, or null.
const ehelf_bpf_row* row_at(const BpfTable& t, uint64_t addr) {
  if (addr < t.base || addr - t.base > UINT32_MAX) return nullptr;
  auto it = std::upper_bound(t.rows.begin(), t.rows.end(), uint32_t(addr - t.base),
                             [](uint32_t pc, const ehelf_bpf_row& r) { return pc < r.pc; });
  return it == t.rows.begin() ? nullptr : &*(it - 1);
}

// A C program with a PLT call, built here with and without frame pointers.
std::string compile_program(const test::TempDir& dir, const std::string& name,
                            const std::string& flags) {
  const std::string src = (dir.path / "prog.c").string();
  const std::string text = "#include <stdio.h>\n"
                           "__attribute__((noinline)) int work(int x) {\n"
                           "  char buf[64]; snprintf(buf, sizeof buf, \"%d\", x); puts(buf);\n"
                           "  return x + 1; }\n"
                           "int main(int argc, char** argv) { (void)argv; return work(argc); }\n";
  test::write_file(src, std::vector<uint8_t>(text.begin(), text.end()));
  const std::string out = (dir.path / name).string();
  const std::string log = test::run_command(fmt::format("cc {} -o {} {} 2>&1", flags, out, src));
  EXPECT_TRUE(std::filesystem::exists(out)) << log;
  return out;
}

// Counts per row kind of the steps the oracle saw the twin unwind (a wrapper of its backend).
struct CountingBackend {
  std::array<uint64_t, kBpfRowKindCount> unwound{};
  BackendUnderTest wrap(const BpfTable& rows) {
    BackendUnderTest inner = bpf_rows_backend(rows);
    BackendUnderTest outer = inner;
    outer.step = [this, &rows, step = inner.step](uint64_t pc, const TableRange& range,
                                                  RegisterState& regs, MemoryReader& mem,
                                                  const SyntheticStack& stack, bool& signal) {
      const BackendAnswer a = step(pc, range, regs, mem, stack, signal);
      if (a == BackendAnswer::Unwound)
        if (const ehelf_bpf_row* r = row_at(rows, pc)) ++unwound[r->kind];
      return a;
    };
    return outer;
  }
};

// check_backend steps at both ends of a range: a PLT row's threshold (rip & 15 against K) shows
// only in between. Here the twin and the model step at every address of the PLT stubs (the
// first 256 of each range); the count of disagreements, `compared` counting the steps.
uint64_t plt_disagreements(const UnwindTable& table, const BpfTable& rows, uint64_t& compared) {
  SyntheticMemory mem;
  uint64_t bad = 0;
  for (const TableRange& r : table.ranges()) {
    const ehelf_bpf_row* row = row_at(rows, r.begin);
    if (!row || row->kind != EHELF_ROW_PLT) continue;
    for (uint64_t pc = r.begin; pc < r.end && pc < r.begin + 256; ++pc) {
      RegisterState regs;
      for (unsigned reg = 0; reg < x86_64::kGeneralRegs; ++reg)
        regs.set(reg, 0x7f0000001000 + 0x100 * reg);
      regs.set(x86_64::RIP, pc);
      RegisterState twin = regs;
      bool exact = false;
      const int stop = bpf_twin_step(rows, pc, twin, mem, exact);
      auto model = table.evaluate(r.row, regs, mem, table.function(r.function).return_column);
      ++compared;
      if (stop != EHELF_STOP_OK || !model) {
        ++bad;
        continue;
      }
      for (unsigned reg : {x86_64::RIP, x86_64::RSP, x86_64::RBP})
        if (twin.has(reg) != model->caller.has(reg) ||
            (twin.has(reg) && twin.get(reg) != model->caller.get(reg))) {
          ++bad;
          break;
        }
    }
  }
  return bad;
}

TEST(BpfRows, TheTwinAgreesWithTheModelOnSystemLibrariesFixturesAndACompiledProgram) {
  test::TempDir dir;
  const std::string with_fp = compile_program(dir, "with_fp", "-O0 -fno-omit-frame-pointer");
  const std::string without_fp =
      compile_program(dir, "without_fp", "-O2 -fomit-frame-pointer -fcf-protection=full");
  std::vector<std::string> paths = {test::libc_path(),
                                    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                    "/usr/lib64/ld-linux-x86-64.so.2",
                                    "/usr/lib/x86_64-linux-gnu/libm.so.6",
                                    with_fp,
                                    without_fp};
  for (const auto& e : std::filesystem::directory_iterator(EHELF_FIXTURE_DIR))
    if (e.is_regular_file() && ::access(e.path().c_str(), X_OK) == 0)
      paths.push_back(e.path().string());
  std::array<uint64_t, kBpfRowKindCount> total{};
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    const UnwindTable table = table_of(path);
    const BpfTable rows = rows_of(table);
    CountingBackend counting;
    const BackendCheck c = check_backend(table, counting.wrap(rows));
    EXPECT_EQ(c.mismatch_count, 0u) << (c.mismatches.empty() ? "" : c.mismatches.front());
    EXPECT_EQ(c.checks, c.agreed + c.both_failed + c.not_applicable + c.mismatch_count);
    EXPECT_EQ(check_bpf_rows(table).mismatch_count, 0u);
    for (unsigned k = 0; k < kBpfRowKindCount; ++k)
      total[k] += counting.unwound[k];
    uint64_t plt_steps = 0;
    EXPECT_EQ(plt_disagreements(table, rows, plt_steps), 0u);
    // The compiled programs: their .plt stubs are PLT rows; -O0 with frame pointers gives
    // rbp-based rows.
    if (path == with_fp || path == without_fp) {
      EXPECT_GT(counting.unwound[EHELF_ROW_PLT], 0u);
    }
    if (path == with_fp) {
      EXPECT_GT(counting.unwound[EHELF_ROW_CFA_RBP], 0u);
    }
  }
  EXPECT_GT(total[EHELF_ROW_CFA_RSP], 10000u);
  EXPECT_GT(total[EHELF_ROW_CFA_RBP], 10u);
  EXPECT_GT(total[EHELF_ROW_PLT], 0u);
  EXPECT_GT(total[EHELF_ROW_SIGNAL], 0u);
  EXPECT_GT(total[EHELF_ROW_END], 0u);
}

TEST(BpfRows, LibcHasPltAndSignalRowsAndTheOracleChecksThem) {
  const UnwindTable table = table_of(test::libc_path());
  const BpfTable rows = rows_of(table);
  EXPECT_GT(rows.rows_by_kind[EHELF_ROW_PLT], 0u);
  EXPECT_EQ(rows.rows_by_kind[EHELF_ROW_SIGNAL], 1u); // __restore_rt
  CountingBackend counting;
  const BackendCheck c = check_backend(table, counting.wrap(rows));
  EXPECT_EQ(c.mismatch_count, 0u) << (c.mismatches.empty() ? "" : c.mismatches.front());
  EXPECT_GT(counting.unwound[EHELF_ROW_PLT], 0u);
  EXPECT_GT(counting.unwound[EHELF_ROW_SIGNAL], 0u);
  uint64_t plt_steps = 0;
  EXPECT_EQ(plt_disagreements(table, rows, plt_steps), 0u);
  EXPECT_GE(plt_steps, 32u); // a stub is 16 bytes: both sides of the threshold, twice
  // The signal row reads the kernel's rt_sigframe as __restore_rt finds it (its return address
  // popped): uc_mcontext's gregs from rsp + 40, in the order r8..r15, rdi, rsi, rbp, rbx, rdx,
  // rax, rcx, rsp, rip.
  for (const ehelf_bpf_row& r : rows.rows)
    if (r.kind == EHELF_ROW_SIGNAL) {
      EXPECT_EQ(r.cfa_offset, 40 + 8 * 15);
      EXPECT_EQ(r.rip_offset, 40 + 8 * 16);
      EXPECT_EQ(r.rbp_offset, 40 + 8 * 10);
      EXPECT_EQ(r.rbx_offset, 40 + 8 * 11);
      EXPECT_EQ(r.flags, EHELF_ROW_SIGNAL_FRAME | EHELF_SAVE_AT_CFA << EHELF_RBX_SHIFT);
    }
}

// The checks catch a wrong row of each kind the encoder recognises from expressions: a PLT
// threshold one off (seen between a range's ends only), a PLT offset or a signal frame's rip one
// word off (seen by the oracle).
TEST(BpfRows, TheChecksCatchWrongPltAndSignalRows) {
  const UnwindTable table = table_of(test::libc_path());
  for (int flaw : {0, 1, 2}) {
    BpfTable rows = rows_of(table);
    for (ehelf_bpf_row& r : rows.rows) {
      if (flaw == 0 && r.kind == EHELF_ROW_PLT) r.rbp_offset += 1;
      if (flaw == 1 && r.kind == EHELF_ROW_PLT) r.cfa_offset += 8;
      if (flaw == 2 && r.kind == EHELF_ROW_SIGNAL) r.rip_offset = int16_t(r.rip_offset + 8);
    }
    uint64_t plt_steps = 0;
    if (flaw == 0)
      EXPECT_GT(plt_disagreements(table, rows, plt_steps), 0u);
    else
      EXPECT_GT(check_backend(table, bpf_rows_backend(rows)).mismatch_count, 0u) << flaw;
  }
}

// readelf's own decoding (-wF: one line per row, "rsp+16", "c-8", "u", "exp") against the rows:
// every row of ours starts at a readelf row or at an FDE's bounds, and the kind and offsets of
// every readelf row are those of the row of ours covering its address.
struct ReadelfComparison {
  uint64_t rows_compared = 0, expression_rows = 0, mismatches = 0, boundaries_not_readelf = 0;
  std::string first_mismatch, boundaries;
};

ReadelfComparison compare_with_readelf(const std::string& path, const BpfTable& rows) {
  ReadelfComparison out;
  const std::string text = test::run_command("readelf -wF " + path + " 2>/dev/null");
  const std::regex fde_re(R"(FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+))");
  const std::regex offset_re(R"(^(r[a-z0-9]+)([+-]\d+)$)");
  std::set<uint64_t> starts;
  std::vector<std::string> columns;
  uint64_t fde_begin = 0, fde_end = 0;
  bool in_fde = false;
  auto fail = [&](uint64_t loc, const std::string& line, const ehelf_bpf_row& r) {
    ++out.mismatches;
    if (out.first_mismatch.empty())
      out.first_mismatch =
          fmt::format("{:#x} [{}]: ours {} cfa {} rip {} flags {} rbp {}", loc, line,
                      bpf_row_kind_name(r.kind), r.cfa_offset, r.rip_offset, r.flags, r.rbp_offset);
  };
  for (const std::string& line : test::lines_of(text)) {
    std::smatch m;
    if (line.find(" CIE") != std::string::npos) in_fde = false;
    if (line.find(" FDE ") != std::string::npos && std::regex_search(line, m, fde_re)) {
      fde_begin = std::stoull(m[1], nullptr, 16);
      fde_end = std::stoull(m[2], nullptr, 16);
      starts.insert(fde_begin);
      starts.insert(fde_end);
      in_fde = true;
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> cells;
    for (std::string w; words >> w;)
      if (w.starts_with("(") && !cells.empty())
        cells.back() += " " + w; // "r9 (r9)": a register rule, one cell
      else
        cells.push_back(w);
    if (cells.empty()) continue;
    if (cells[0] == "LOC") {
      columns = cells;
      continue;
    }
    if (!in_fde || cells[0].size() != 16 || cells.size() != columns.size()) continue;
    const uint64_t loc = std::stoull(cells[0], nullptr, 16);
    if (loc < fde_begin || loc >= fde_end) continue;
    starts.insert(loc);
    std::map<std::string, std::string> cell;
    for (size_t i = 1; i < cells.size(); ++i)
      cell[columns[i]] = cells[i];
    const ehelf_bpf_row* ours = row_at(rows, loc);
    if (!ours) {
      fail(loc, line, ehelf_bpf_row{});
      continue;
    }
    ++out.rows_compared;
    const std::string& cfa = cell["CFA"];
    const std::string ra = cell.count("ra") ? cell["ra"] : "u";
    const std::string rbp = cell.count("rbp") ? cell["rbp"] : "s";
    const std::string rbx = cell.count("rbx") ? cell["rbx"] : "s";
    if (cfa == "exp") {
      ++out.expression_rows;
      if (ours->kind != EHELF_ROW_PLT && ours->kind != EHELF_ROW_SIGNAL &&
          ours->kind != EHELF_ROW_STOP && ours->kind != EHELF_ROW_END)
        fail(loc, line, *ours);
      continue;
    }
    if (cell.count("rsp") && cell["rsp"] == "u") continue; // no rule or undefined: readelf alike
    // What to_unwind_rule's order of checks gives for this row.
    auto offset_of = [](const std::string& c, int64_t& v) {
      if (c.size() < 3 || c[0] != 'c') return false;
      v = std::stoll(c.substr(1));
      return true;
    };
    ehelf_bpf_row want{};
    std::smatch cm;
    int64_t rip_off = 0, rbp_off = 0, rbx_off = 0;
    const bool rbp_unknown_or_same = rbp == "u" || rbp == "s";
    const bool rbx_unknown_or_same = rbx == "u" || rbx == "s";
    auto stop = [&](NotExpressible why) {
      want.kind = EHELF_ROW_STOP;
      want.cfa_offset = int32_t(why);
    };
    if (!std::regex_match(cfa, cm, offset_re))
      stop(NotExpressible::CfaIsExpression); // readelf's "u" CFA: no rule
    else if (cm[1] != "rsp" && cm[1] != "rbp" && cm[1] != "rbx")
      stop(NotExpressible::CfaRegisterNotRspOrRbp);
    else if (cell.count("rsp"))
      stop(NotExpressible::RuleForRsp);
    else if (ra != "u" && !offset_of(ra, rip_off))
      stop(NotExpressible::ReturnAddressNotSaved);
    else if (!rbp_unknown_or_same && !offset_of(rbp, rbp_off))
      stop(NotExpressible::RegisterRuleNotOffset);
    else if (!rbx_unknown_or_same && !offset_of(rbx, rbx_off))
      stop(NotExpressible::RegisterRuleNotOffset);
    else if (ra == "u")
      want.kind = EHELF_ROW_END;
    else {
      want.kind = cm[1] == "rsp"   ? EHELF_ROW_CFA_RSP
                  : cm[1] == "rbp" ? EHELF_ROW_CFA_RBP
                                   : EHELF_ROW_CFA_RBX;
      want.cfa_offset = int32_t(std::stoll(cm[2]));
      want.rip_offset = int16_t(rip_off);
      if (!rbp_unknown_or_same) {
        want.flags = EHELF_SAVE_AT_CFA;
        want.rbp_offset = int16_t(rbp_off);
      }
    }
    bool same = ours->kind == want.kind && ours->cfa_offset == want.cfa_offset;
    if (want.kind == EHELF_ROW_CFA_RSP || want.kind == EHELF_ROW_CFA_RBP ||
        want.kind == EHELF_ROW_CFA_RBX) {
      same = same && ours->rip_offset == want.rip_offset;
      // readelf prints "u" for a column without a rule too.
      auto saved_as = [&](unsigned save, const std::string& cell, int64_t offset, int16_t ours_at) {
        if (cell == "u" || cell == "s")
          return cell == "s" ? save == EHELF_SAVE_SAME : save != EHELF_SAVE_AT_CFA;
        return save == EHELF_SAVE_AT_CFA && ours_at == offset;
      };
      same = same && saved_as(ours->flags & EHELF_SAVE_MASK, rbp, rbp_off, ours->rbp_offset) &&
             saved_as((ours->flags & EHELF_RBX_MASK) >> EHELF_RBX_SHIFT, rbx, rbx_off,
                      ours->rbx_offset);
    }
    if (!same) fail(loc, line, *ours);
  }
  for (const ehelf_bpf_row& r : rows.rows)
    if (!starts.count(rows.base + r.pc)) {
      ++out.boundaries_not_readelf;
      out.boundaries += fmt::format(" {:#x} ({})", rows.base + r.pc, bpf_row_kind_name(r.kind));
    }
  return out;
}

TEST(BpfRows, RowsAreReadelfsRowsMergedAndKindsAgree) {
  for (const std::string& path :
       {std::string(test::libc_path()), std::string("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
        std::string("/usr/lib64/ld-linux-x86-64.so.2")}) {
    SCOPED_TRACE(path);
    const BpfTable rows = rows_of(table_of(path));
    const ReadelfComparison c = compare_with_readelf(path, rows);
    EXPECT_GT(c.rows_compared, 1000u);
    EXPECT_GT(c.expression_rows, 0u); // the .plt at least
    EXPECT_EQ(c.mismatches, 0u) << c.first_mismatch;
    EXPECT_EQ(c.boundaries_not_readelf, 0u) << c.boundaries;
    // Merging: fewer rows than readelf's, never more than its rows plus a gap row per FDE.
    EXPECT_LT(rows.rows.size(), c.rows_compared * 2);
    uint64_t by_kind = 0;
    for (uint64_t n : rows.rows_by_kind)
      by_kind += n;
    EXPECT_EQ(by_kind, rows.rows.size());
    EXPECT_EQ(rows.rows.back().kind, EHELF_ROW_NONE);
    for (size_t i = 1; i < rows.rows.size(); ++i) {
      ASSERT_LT(rows.rows[i - 1].pc, rows.rows[i].pc);
      ehelf_bpf_row prev = rows.rows[i - 1];
      prev.pc = rows.rows[i].pc;
      EXPECT_NE(std::memcmp(&prev, &rows.rows[i], sizeof prev), 0) << "unmerged rows at " << i;
    }
  }
}

// The page index bounds the kernel's search to a page's rows; it must find the row a search of
// the whole table finds, at every row's first address, the byte before it and the last byte of
// every page, on libraries whose rows are dense (libc, libstdc++) and on a sparse hand-made
// table (gaps of megabytes between functions), and cost at most a quarter more memory.
TEST(BpfRows, ThePageIndexFindsTheRowAWholeTableSearchFinds) {
  std::vector<BpfTable> tables;
  for (const std::string& path :
       {std::string(test::libc_path()), std::string("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")})
    tables.push_back(rows_of(table_of(path)));
  UnwindTable sparse;
  const uint32_t fn = sparse.add_function(FunctionInfo{});
  const std::vector<ColumnRule> columns = {
      ColumnRule{x86_64::RIP, RegisterRule{RegisterRule::Kind::Offset, 0, -8, kNoExpression}}};
  const uint32_t row =
      sparse.intern_row(CfaRule{CfaRule::Kind::RegOffset, x86_64::RSP, 8, kNoExpression}, columns);
  for (uint64_t begin : {0x1000ull, 0x1010ull, 0x250000ull, 0x250001ull, 0x9000000ull})
    sparse.add_range(TableRange{begin, begin + 1, row, fn, 0});
  sparse.finish();
  tables.push_back(rows_of(sparse));
  for (const BpfTable& t : tables) {
    SCOPED_TRACE(fmt::format("{} rows, pages of 2^{}", t.rows.size(), t.page_shift));
    ASSERT_FALSE(t.rows.empty());
    EXPECT_LE(t.page_index.size() * EHELF_PAGE_ENTRIES, t.rows.size() + 2 * EHELF_PAGE_ENTRIES);
    EXPECT_GE(t.page_index.size() * EHELF_PAGE_ENTRIES, size_t(t.page_count) + 1);
    std::vector<uint64_t> probes = {t.base - 1, t.base + (uint64_t(1) << 32)};
    for (const ehelf_bpf_row& r : t.rows)
      for (uint64_t d : {0, 1, 2})
        probes.push_back(t.base + r.pc - d);
    for (uint64_t page = 0; page <= t.page_count + 1; ++page)
      probes.push_back(t.base + (page << t.page_shift) - 1);
    size_t checked = 0;
    for (uint64_t pc : probes) {
      const ehelf_bpf_row* want = row_at(t, pc);
      const int64_t got = bpf_twin_find_row(t, pc);
      ASSERT_EQ(got < 0 ? nullptr : &t.rows[size_t(got)], want) << fmt::format("at {:#x}", pc);
      ++checked;
    }
    EXPECT_GT(checked, t.rows.size());
  }
}

// ---- hand-built tables: odd rules give STOP rows (with their reason) or a refusal ----

struct HandTable {
  UnwindTable table;
  uint32_t plain_fn = 0, signal_fn = 0;
  HandTable() {
    FunctionInfo fn;
    plain_fn = table.add_function(fn);
    fn.signal_frame = true;
    signal_fn = table.add_function(fn);
  }
  uint32_t expr(std::vector<uint8_t> bytes) {
    return table.add_expression(EHELF_OK(Expression::decode(bytes)));
  }
  void add(uint64_t begin, uint64_t end, CfaRule cfa, std::vector<ColumnRule> columns,
           bool signal = false) {
    table.add_range(
        TableRange{begin, end, table.intern_row(cfa, columns), signal ? signal_fn : plain_fn, 0});
  }
  // [begin, end) as glibc's __restore_rt: CFA = *(rsp + 160), rbp, rsp and rip read from the
  // kernel's rt_sigframe at rsp + 120, 160 and 168.
  void add_restore_rt(uint64_t begin, uint64_t end) {
    using K = RegisterRule::Kind;
    const CfaRule cfa{CfaRule::Kind::Expression, 0, 0, expr({0x77, 0xa0, 0x01, 0x06})};
    add(begin, end, cfa,
        {ColumnRule{x86_64::RBP, RegisterRule{K::Expression, 0, 0, expr({0x77, 0xf8, 0x00})}},
         ColumnRule{x86_64::RSP, RegisterRule{K::Expression, 0, 0, expr({0x77, 0xa0, 0x01})}},
         ColumnRule{x86_64::RIP, RegisterRule{K::Expression, 0, 0, expr({0x77, 0xa8, 0x01})}}},
        true);
  }
};

CfaRule reg_plus(uint16_t reg, int64_t n) {
  return CfaRule{CfaRule::Kind::RegOffset, reg, n, kNoExpression};
}
ColumnRule rule(uint16_t column, RegisterRule::Kind kind, int64_t offset = 0,
                uint32_t expr = kNoExpression, uint16_t reg = 0) {
  return ColumnRule{column, RegisterRule{kind, reg, offset, expr}};
}

TEST(BpfRows, OddRulesGiveStopRowsWithTheirReasonNeverACrash) {
  using K = RegisterRule::Kind;
  HandTable h;
  const ColumnRule ra = rule(x86_64::RIP, K::Offset, -8);
  const uint32_t garbage = h.expr({0x30, 0x31, 0x22}); // lit0; lit1; plus
  const uint32_t near_plt = h.expr({0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2b, 0x33, 0x24,
                                    0x22}); // the PLT's, with DW_OP_gt for DW_OP_ge
  const uint32_t signal_cfa = h.expr({0x77, 0xa0, 0x01, 0x06}); // breg7 160; deref
  const uint32_t slot_168 = h.expr({0x77, 0xa8, 0x01});         // breg7 168
  const uint32_t slot_120 = h.expr({0x77, 0xf8, 0x00});         // breg7 120
  struct Case {
    CfaRule cfa;
    std::vector<ColumnRule> columns;
    bool signal;
    NotExpressible why;
  };
  const CfaRule undefined_cfa{};
  const CfaRule expr_cfa{CfaRule::Kind::Expression, 0, 0, garbage};
  const CfaRule plt_like{CfaRule::Kind::Expression, 0, 0, near_plt};
  const CfaRule signal_like{CfaRule::Kind::Expression, 0, 0, signal_cfa};
  const std::vector<Case> cases = {
      {undefined_cfa, {ra}, false, NotExpressible::CfaIsExpression},
      {expr_cfa, {ra}, false, NotExpressible::CfaIsExpression},
      {plt_like, {ra}, false, NotExpressible::CfaIsExpression},
      {reg_plus(x86_64::R10, 0), {ra}, false, NotExpressible::CfaRegisterNotRspOrRbp},
      {reg_plus(x86_64::RSP, int64_t(1) << 40), {ra}, false, NotExpressible::CfaOffsetDoesNotFit},
      {reg_plus(x86_64::RSP, 8),
       {rule(x86_64::RSP, K::ValOffset, 0), ra},
       false,
       NotExpressible::RuleForRsp},
      {reg_plus(x86_64::RSP, 8),
       {rule(x86_64::RIP, K::Register, 0, kNoExpression, 0)},
       false,
       NotExpressible::ReturnAddressNotSaved},
      {reg_plus(x86_64::RSP, 8),
       {rule(x86_64::RIP, K::SameValue)},
       false,
       NotExpressible::ReturnAddressNotSaved},
      {reg_plus(x86_64::RSP, 8),
       {rule(x86_64::RBP, K::ValOffset, 8), ra},
       false,
       NotExpressible::RegisterRuleNotOffset},
      {reg_plus(x86_64::RSP, 8),
       {rule(x86_64::RBP, K::Offset, 1 << 20), ra},
       false,
       NotExpressible::OffsetDoesNotFit},
      {reg_plus(x86_64::RSP, 8),
       {rule(x86_64::RIP, K::Offset, 1 << 20)},
       false,
       NotExpressible::OffsetDoesNotFit},
      // rbx in an expression (the runtime's compact rules interpret such rows too).
      {reg_plus(x86_64::RSP, 16),
       {rule(x86_64::RBX, K::Expression, 0, garbage), ra},
       false,
       NotExpressible::RegisterRuleNotOffset},
      // A signal frame's CFA outside an 'S' FDE, and one whose rbp is not in the frame.
      {signal_like,
       {rule(x86_64::RBP, K::Expression, 0, slot_120),
        rule(x86_64::RIP, K::Expression, 0, slot_168)},
       false,
       NotExpressible::CfaIsExpression},
      {signal_like,
       {rule(x86_64::RIP, K::Expression, 0, slot_168)},
       true,
       NotExpressible::RegisterRuleNotOffset},
      {signal_like,
       {rule(x86_64::RBP, K::Expression, 0, slot_120)},
       true,
       NotExpressible::ReturnAddressNotSaved},
  };
  uint64_t pc = 0x1000;
  for (const Case& c : cases) {
    h.add(pc, pc + 0x10, c.cfa, c.columns, c.signal);
    pc += 0x20; // a gap after each
  }
  // Any register but rip, rsp, rbp and rbx in an expression or another register: still a CFA_RSP
  // row.
  const uint64_t fine_at = pc;
  h.add(pc, pc + 0x10, reg_plus(x86_64::RSP, 16),
        {rule(x86_64::R13, K::Expression, 0, garbage),
         rule(x86_64::R12, K::Register, 0, kNoExpression, 3), ra});
  h.table.finish();

  auto rows = encode_bpf_rows(h.table);
  ASSERT_TRUE(rows) << rows.error().to_string();
  pc = 0x1000;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("case at {:#x}", pc));
    const ehelf_bpf_row* r = row_at(*rows, pc);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->kind, EHELF_ROW_STOP);
    EXPECT_EQ(NotExpressible(r->cfa_offset), c.why)
        << not_expressible_name(NotExpressible(r->cfa_offset));
    EXPECT_EQ(row_at(*rows, pc + 0x10)->kind, EHELF_ROW_NONE); // the gap
    pc += 0x20;
  }
  EXPECT_EQ(row_at(*rows, fine_at)->kind, EHELF_ROW_CFA_RSP);
  EXPECT_EQ(row_at(*rows, fine_at)->cfa_offset, 16);
  EXPECT_EQ(rows->rows.back().kind, EHELF_ROW_NONE);
  EXPECT_EQ(rows->stop_by_reason[size_t(NotExpressible::CfaIsExpression)], 4u);
  // STOP rows are left to the interpreter; the rest agrees with the model.
  const BackendCheck check = check_backend(h.table, bpf_rows_backend(*rows));
  EXPECT_EQ(check.mismatch_count, 0u) << (check.mismatches.empty() ? "" : check.mismatches[0]);
  EXPECT_EQ(check.not_applicable, 3 * cases.size());
}

TEST(BpfRows, AHandBuiltSignalFrameIsASignalRowAndTheTwinReadsTheFrame) {
  HandTable h;
  h.add_restore_rt(0x2000, 0x2010);
  h.table.finish();
  auto rows = encode_bpf_rows(h.table);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->rows.size(), 2u);
  EXPECT_EQ(rows->rows[0].kind, EHELF_ROW_SIGNAL);
  SyntheticMemory mem;
  RegisterState regs;
  regs.set(x86_64::RIP, 0x2004);
  regs.set(x86_64::RSP, 0x7000);
  regs.set(x86_64::RBP, 1);
  bool exact = false;
  ASSERT_EQ(bpf_twin_step(*rows, 0x2004, regs, mem, exact), EHELF_STOP_OK);
  EXPECT_EQ(regs.get(x86_64::RSP), synthetic_word(0x7000 + 160));
  EXPECT_EQ(regs.get(x86_64::RIP), synthetic_word(0x7000 + 168));
  EXPECT_EQ(regs.get(x86_64::RBP), synthetic_word(0x7000 + 120));
  EXPECT_TRUE(exact);
  // Outside the table, and in the NONE row after it: no entry, registers unchanged.
  const RegisterState before = regs;
  EXPECT_EQ(bpf_twin_step(*rows, 0x1fff, regs, mem, exact), EHELF_STOP_NO_ENTRY);
  EXPECT_EQ(bpf_twin_step(*rows, 0x2010, regs, mem, exact), EHELF_STOP_NO_ENTRY);
  EXPECT_EQ(regs, before);
  EXPECT_EQ(check_backend(h.table, bpf_rows_backend(*rows)).mismatch_count, 0u);
}

// ld.so's lazy-binding trampolines: CFA = rbx + N while rsp is realigned, rbx saved at CFA - N.
// The walk knows rbx from the sample's registers, or from the rows of the frames below: here the
// oracle checks the step both ways (rbx known, rbx unknown: a stop, as the model's).
TEST(BpfRows, ACfaOnRbxIsACfaRbxRowWithRbxTracked) {
  using K = RegisterRule::Kind;
  HandTable h;
  h.add(0x3000, 0x3010, reg_plus(x86_64::RBX, 56),
        {rule(x86_64::RBX, K::Offset, -56), rule(x86_64::RIP, K::Offset, -8)});
  h.add(0x3010, 0x3020, reg_plus(x86_64::RSP, 16),
        {rule(x86_64::RBX, K::Offset, -16), rule(x86_64::RIP, K::Offset, -8)});
  h.table.finish();
  auto rows = encode_bpf_rows(h.table);
  ASSERT_TRUE(rows) << rows.error().to_string();
  ASSERT_EQ(rows->rows.size(), 3u);
  EXPECT_EQ(rows->rows[0].kind, EHELF_ROW_CFA_RBX);
  EXPECT_EQ(rows->rows[0].cfa_offset, 56);
  EXPECT_EQ(rows->rows[0].rbx_offset, -56);
  EXPECT_EQ(rows->rows[0].flags, EHELF_SAVE_AT_CFA << EHELF_RBX_SHIFT);
  EXPECT_EQ(rows->rows[1].kind, EHELF_ROW_CFA_RSP);
  EXPECT_EQ(rows->rows[1].rbx_offset, -16);
  SyntheticMemory mem;
  RegisterState regs;
  regs.set(x86_64::RIP, 0x3004);
  regs.set(x86_64::RSP, 0x6000);
  regs.set(x86_64::RBP, 0x6100);
  regs.set(x86_64::RBX, 0x7000);
  bool exact = true;
  ASSERT_EQ(bpf_twin_step(*rows, 0x3004, regs, mem, exact), EHELF_STOP_OK);
  EXPECT_EQ(regs.get(x86_64::RSP), 0x7000u + 56);
  EXPECT_EQ(regs.get(x86_64::RIP), synthetic_word(0x7000 + 56 - 8));
  EXPECT_EQ(regs.get(x86_64::RBX), synthetic_word(0x7000));
  EXPECT_EQ(regs.get(x86_64::RBP), 0x6100u);
  EXPECT_FALSE(exact);
  RegisterState unknown;
  unknown.set(x86_64::RIP, 0x3004);
  unknown.set(x86_64::RSP, 0x6000);
  EXPECT_EQ(bpf_twin_step(*rows, 0x3004, unknown, mem, exact), EHELF_STOP_MISSING_REGISTER);
  const BackendCheck check = check_backend(h.table, bpf_rows_backend(*rows));
  EXPECT_EQ(check.mismatch_count, 0u) << (check.mismatches.empty() ? "" : check.mismatches[0]);
  EXPECT_EQ(check.agreed, check.checks - check.both_failed);
  EXPECT_GT(check.agreed, 0u);
}

// Synthetic memory but for one word, changed.
class OneWordChanged final : public MemoryReader {
public:
  explicit OneWordChanged(uint64_t addr) : addr_(addr) {}
  bool read(uint64_t addr, void* out, size_t size) override {
    if (!real_.read(addr, out, size)) return false;
    if (addr == addr_ && size == 8) *static_cast<uint64_t*>(out) ^= 0xff00;
    return true;
  }

private:
  SyntheticMemory real_;
  uint64_t addr_;
};

// The program keeps its CPU's last walk and takes a step of it again when a later walk reaches
// the same registers and the words that step read are the same (bpf_walk.h: ehelf_memo_frame):
// a step through CFA = rbp + 16 with rbp and rbx saved keeps three words, one through
// CFA = rsp + 8 the return address, a signal frame's step none.
TEST(BpfRows, AStepIsTakenAgainFromTheLastWalkOnlyWhenTheWordsItReadAreTheSame) {
  using K = RegisterRule::Kind;
  HandTable h;
  h.add(0x4000, 0x4010, reg_plus(x86_64::RBP, 16),
        {rule(x86_64::RBP, K::Offset, -16), rule(x86_64::RBX, K::Offset, -24),
         rule(x86_64::RIP, K::Offset, -8)});
  h.add(0x4010, 0x4020, reg_plus(x86_64::RSP, 8), {rule(x86_64::RIP, K::Offset, -8)});
  h.add_restore_rt(0x5000, 0x5010);
  h.table.finish();
  auto rows = encode_bpf_rows(h.table);
  ASSERT_TRUE(rows) << rows.error().to_string();
  SyntheticMemory mem;
  RegisterState regs;
  regs.set(x86_64::RIP, 0x4004);
  regs.set(x86_64::RSP, 0x6000);
  regs.set(x86_64::RBP, 0x6100);
  regs.set(x86_64::RBX, 0x42);
  ehelf_memo_frame memo{};
  ehelf_bpf_regs caller{};
  ASSERT_EQ(bpf_twin_memo_of(*rows, 0x4004, regs, mem, memo, caller), EHELF_STOP_OK);
  EXPECT_EQ(memo.flags, EHELF_MEMO_STEP | EHELF_MEMO_RBP_READ | EHELF_MEMO_RBX_READ);
  EXPECT_EQ(memo.regs.rsp, 0x6000u);
  EXPECT_EQ(caller.rsp, 0x6110u);
  EXPECT_EQ(caller.rip, synthetic_word(0x6110 - 8));
  EXPECT_EQ(caller.rbp, synthetic_word(0x6110 - 16));
  EXPECT_EQ(caller.rbx, synthetic_word(0x6110 - 24));
  EXPECT_TRUE(bpf_twin_memo_check(memo, caller, mem));
  // Another caller with the same registers: any of the three words changed, not taken; a word
  // beside them changed, taken.
  for (uint64_t addr : {0x6110 - 8, 0x6110 - 16, 0x6110 - 24}) {
    OneWordChanged changed(addr);
    EXPECT_FALSE(bpf_twin_memo_check(memo, caller, changed)) << std::hex << addr;
  }
  OneWordChanged beside(0x6110 - 32);
  EXPECT_TRUE(bpf_twin_memo_check(memo, caller, beside));
  std::string why;
  EXPECT_TRUE(bpf_twin_memo_sound(*rows, 0x4004, regs, mem, &why)) << why;
  // CFA = rsp + 8: the return address alone.
  regs.set(x86_64::RIP, 0x4014);
  ASSERT_EQ(bpf_twin_memo_of(*rows, 0x4014, regs, mem, memo, caller), EHELF_STOP_OK);
  EXPECT_EQ(memo.flags, EHELF_MEMO_STEP);
  EXPECT_EQ(memo.rip_offset, -8);
  OneWordChanged ra(0x6008 - 8);
  EXPECT_FALSE(bpf_twin_memo_check(memo, caller, ra));
  EXPECT_TRUE(bpf_twin_memo_sound(*rows, 0x4014, regs, mem, &why)) << why;
  // A signal frame: its step is always taken afresh.
  regs.set(x86_64::RIP, 0x5004);
  ASSERT_EQ(bpf_twin_memo_of(*rows, 0x5004, regs, mem, memo, caller), EHELF_STOP_OK);
  EXPECT_EQ(memo.flags, 0);
  // The oracle holds every kept step to these checks (bpf_rows_backend).
  EXPECT_EQ(check_backend(h.table, bpf_rows_backend(*rows)).mismatch_count, 0u);
}

TEST(BpfRows, RefusesTablesBeyondFourGiBAndUnsortedRanges) {
  const ColumnRule ra = rule(x86_64::RIP, RegisterRule::Kind::Offset, -8);
  {
    HandTable h;
    h.add(0x1000, 0x1010, reg_plus(x86_64::RSP, 8), {ra});
    h.add(0x1000 + (uint64_t(1) << 32), 0x1010 + (uint64_t(1) << 32), reg_plus(x86_64::RSP, 8),
          {ra});
    h.table.finish();
    auto rows = encode_bpf_rows(h.table);
    ASSERT_FALSE(rows);
    EXPECT_NE(rows.error().message.find("4 GiB"), std::string::npos);
    const BackendCheck c = check_bpf_rows(h.table);
    EXPECT_EQ(c.checks, 0u);
    EXPECT_TRUE(c.ok());
    ASSERT_EQ(c.mismatches.size(), 1u);
  }
  {
    // Just below: the last row's end is base + 4 GiB - 1.
    HandTable h;
    h.add(0x1000, 0x1010, reg_plus(x86_64::RSP, 8), {ra});
    h.add(0x2000, 0x1000 + uint64_t(UINT32_MAX), reg_plus(x86_64::RSP, 16), {ra});
    h.table.finish();
    auto rows = encode_bpf_rows(h.table);
    ASSERT_TRUE(rows) << rows.error().to_string();
    EXPECT_EQ(rows->rows.size(), 4u);
    EXPECT_EQ(rows->rows.back().pc, UINT32_MAX);
  }
  {
    HandTable h; // not finished: ranges out of order and overlapping
    h.add(0x2000, 0x2010, reg_plus(x86_64::RSP, 8), {ra});
    h.add(0x1000, 0x2008, reg_plus(x86_64::RSP, 8), {ra});
    EXPECT_FALSE(encode_bpf_rows(h.table));
  }
  EXPECT_TRUE(EHELF_OK(encode_bpf_rows(UnwindTable{})).rows.empty());
}

} // namespace
} // namespace ehelf
