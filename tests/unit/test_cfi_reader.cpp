// The CFI reader and table builder on real binaries, checked against readelf and the symbol
// table, and on hostile input (truncations, bit flips, crafted entries).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <random>
#include <sstream>

#include "dwarf/cfa_interpreter.hpp"
#include "dwarf/cfi_limits.hpp"
#include "dwarf/module_cfi.hpp"
#include "report/readelf_frames.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

size_t count_lines_containing(const std::string& text, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    n += line.find(needle) != std::string::npos;
  return n;
}

TEST(CfiReader, LibcEntriesMatchReadelf) {
  auto m = load_module_cfi(test::libc_path());
  ASSERT_TRUE(m) << m.error().to_string();
  ASSERT_TRUE(m->eh_frame);
  EXPECT_FALSE(m->eh_frame->error);
  std::string raw = test::run_command(std::string("readelf --debug-dump=frames ") +
                                      test::libc_path() + " 2>/dev/null");
  EXPECT_EQ(m->eh_frame->fdes.size(), count_lines_containing(raw, " FDE cie="));
  EXPECT_EQ(m->eh_frame->cies.size(), count_lines_containing(raw, " CIE"));
  // The search table in .eh_frame_hdr lists exactly the FDEs, sorted.
  ASSERT_TRUE(m->eh_frame_hdr);
  EXPECT_TRUE(m->eh_frame_hdr_problems.empty()) << m->eh_frame_hdr_problems.front();
  EXPECT_GT(m->eh_frame_hdr->table.size(), 1000u);
}

TEST(CfiReader, LibcTableCoversFunctionSymbols) {
  auto m = load_module_cfi(test::libc_path());
  ASSERT_TRUE(m);
  TableBuildStats stats;
  auto t0 = std::chrono::steady_clock::now();
  auto table = build_unwind_table(*m, &stats);
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  ASSERT_TRUE(table) << table.error().to_string();
  RecordProperty("build_ms", std::to_string(ms.count()));
  // libc: ~20k rows in ~3.5k FDEs, deduplicated to a small pool.
  EXPECT_GT(stats.rows, 10000u);
  EXPECT_LT(table->row_count(), stats.rows / 10);
  // Every sized function symbol's entry point lies in a range whose FDE starts there.
  size_t checked = 0, found = 0;
  for (const Symbol& s : m->elf->symbols()) {
    if (s.type != 2 /* STT_FUNC */ || s.size == 0) continue;
    ++checked;
    if (const TableRange* r = table->find(s.value)) {
      const FunctionInfo& f = table->function(r->function);
      found += f.pc_begin <= s.value && s.value < f.pc_end;
    }
  }
  ASSERT_GT(checked, 1000u);
  EXPECT_GT(found, checked * 95 / 100) << found << " of " << checked;
  // At a function's entry the CFA is rsp+8 and the return address is at CFA-8.
  const Symbol* malloc_sym = nullptr;
  for (const Symbol& s : m->elf->symbols())
    if (s.name == "malloc") malloc_sym = &s;
  ASSERT_NE(malloc_sym, nullptr);
  const TableRange* r = table->find(malloc_sym->value);
  ASSERT_NE(r, nullptr);
  RowView row = table->row(r->row);
  EXPECT_EQ(row.cfa.kind, CfaRule::Kind::RegOffset);
  EXPECT_EQ(row.cfa.reg, x86_64::RSP);
  EXPECT_EQ(row.cfa.offset, 8);
  ASSERT_NE(row.rule_for(x86_64::RIP), nullptr);
  EXPECT_EQ(row.rule_for(x86_64::RIP)->kind, RegisterRule::Kind::Offset);
  EXPECT_EQ(row.rule_for(x86_64::RIP)->offset, -8);
}

// A fake stack for evaluating rows: reads succeed inside [base, base + size).
class FakeStack final : public MemoryReader {
public:
  FakeStack(uint64_t base, std::vector<uint64_t> words) : base_(base), words_(std::move(words)) {}
  bool read(uint64_t addr, void* out, size_t size) override {
    if (addr < base_ || addr + size > base_ + words_.size() * 8 || addr + size < addr) return false;
    std::memcpy(out, reinterpret_cast<const uint8_t*>(words_.data()) + (addr - base_), size);
    return true;
  }

private:
  uint64_t base_;
  std::vector<uint64_t> words_;
};

TEST(CfiReader, EvaluateEntryRowRecoversReturnAddress) {
  auto m = load_module_cfi(test::libc_path());
  ASSERT_TRUE(m);
  auto table = build_unwind_table(*m);
  ASSERT_TRUE(table);
  const Symbol* fn = nullptr;
  for (const Symbol& s : m->elf->symbols())
    if (s.name == "qsort") fn = &s;
  ASSERT_NE(fn, nullptr);
  const TableRange* r = table->find(fn->value);
  ASSERT_NE(r, nullptr);
  FakeStack stack(0x7000, {0x401234, 0xdead});
  RegisterState regs;
  regs.set(x86_64::RSP, 0x7000);
  regs.set(x86_64::RIP, fn->value);
  regs.set(x86_64::RBX, 77);
  auto step = table->evaluate(r->row, regs, stack);
  ASSERT_TRUE(step) << step.error().to_string();
  EXPECT_EQ(step->cfa, 0x7008u);
  EXPECT_EQ(step->caller.get(x86_64::RIP), 0x401234u);
  EXPECT_EQ(step->caller.get(x86_64::RSP), 0x7008u);
  EXPECT_EQ(step->caller.get(x86_64::RBX), 77u); // no rule: same value
}

// ---- hostile input ----

struct Section {
  std::vector<uint8_t> bytes;
};

// Parses and fully interprets an .eh_frame image; returns the first error text, or "".
std::string parse_all(std::span<const uint8_t> data, CfiFormat fmt = CfiFormat::EhFrame) {
  PointerBases bases;
  bases.section_addr = 0x1000;
  CfiSection s = parse_cfi_section(data, fmt, ".eh_frame", bases);
  UnwindTable table;
  CfaInterpreter interp(table);
  for (const Fde& f : s.fdes) {
    auto st = interp.run(s, s.cies[f.cie], f, bases,
                         [](const InterpretedRow& r) { EXPECT_LT(r.begin, r.end); });
    if (!st) return st.error().to_string();
  }
  // The readelf renderer must survive the same input.
  return s.error ? s.error->to_string() : "";
}

std::vector<uint8_t> libc_eh_frame() {
  auto elf = EHELF_OK(ElfFile::open(test::libc_path()));
  const ehelf::Section* s = elf->find_section(".eh_frame");
  if (!s) throw test::FailedResult("libc has no .eh_frame");
  auto data = EHELF_OK(elf->section_data(*s));
  return std::vector<uint8_t>(data.begin(), data.end());
}

TEST(CfiHostile, EveryTruncationOfRealDataIsHandled) {
  auto bytes = libc_eh_frame();
  ASSERT_GT(bytes.size(), 4096u);
  // All cut points in the first 2 KiB, then a sparse sample.
  for (size_t cut = 0; cut < bytes.size(); cut += cut < 2048 ? 1 : 997) {
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + cut);
    std::string err = parse_all(part);
    if (!err.empty()) {
      EXPECT_NE(err.find(".eh_frame+0x"), std::string::npos) << err;
    }
  }
}

TEST(CfiHostile, RandomBitFlipsNeverCrash) {
  auto bytes = libc_eh_frame();
  bytes.resize(16384);
  std::mt19937_64 rng(12345);
  size_t errors = 0;
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> copy = bytes;
    for (int k = 0; k < 4; ++k)
      copy[rng() % copy.size()] ^= uint8_t(1u << (rng() % 8));
    errors += !parse_all(copy).empty();
  }
  EXPECT_GT(errors, 0u); // the flips do hit something the reader must reject
}

void put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i)
    v.push_back(uint8_t(x >> (8 * i)));
}

// Prefixes `body` with its 32-bit length.
std::vector<uint8_t> entry(const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out;
  put32(out, static_cast<uint32_t>(body.size()));
  for (uint8_t b : body)
    out.push_back(b);
  return out;
}

// A minimal CIE: version 1, "zR", code 1, data -8, ra 16, R = pcrel|sdata4, def_cfa rsp+8.
std::vector<uint8_t> small_cie() {
  return entry({0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8});
}

// An FDE at `at` (its section offset) pointing to the CIE at 0, with the given program.
std::vector<uint8_t> small_fde(size_t at, const std::vector<uint8_t>& program,
                               uint32_t range = 0x40) {
  std::vector<uint8_t> body;
  put32(body, static_cast<uint32_t>(at + 4)); // CIE pointer
  put32(body, 0x100);
  put32(body, range);
  body.push_back(0); // augmentation data length
  for (uint8_t b : program)
    body.push_back(b);
  return entry(body);
}

std::vector<uint8_t> section_with(const std::vector<uint8_t>& program, uint32_t range = 0x40) {
  auto s = small_cie();
  for (uint8_t b : small_fde(s.size(), program, range))
    s.push_back(b);
  return s;
}

TEST(CfiHostile, CraftedEntriesGiveOneLineErrorsWithOffsets) {
  EXPECT_EQ(parse_all(section_with({0x41, 0x0e, 16})), ""); // a valid baseline

  auto past_end = section_with({});
  past_end[0] = 0xff; // CIE length runs past the end
  EXPECT_NE(parse_all(past_end).find("runs past the end"), std::string::npos);

  auto bad_cie_ptr = section_with({});
  bad_cie_ptr[small_cie().size() + 4] = 0x7f; // CIE pointer far before the section
  EXPECT_NE(parse_all(bad_cie_ptr).find("CIE pointer"), std::string::npos);

  // An absurd LEB128 (20 continuation bytes) as a def_cfa_offset operand.
  std::vector<uint8_t> leb = {0x0e};
  leb.insert(leb.end(), 20, 0x80);
  leb.push_back(1);
  EXPECT_NE(parse_all(section_with(leb)).find("truncated operand"), std::string::npos);

  EXPECT_NE(parse_all(section_with({0x0b})).find("no remembered state"), std::string::npos);
  EXPECT_NE(parse_all(section_with({0x3f})).find("unknown call frame instruction"),
            std::string::npos);
  EXPECT_NE(parse_all(section_with({0x07, 0xff, 0xff, 0x03})).find("too large"), std::string::npos);
  // Expression with a backwards branch onto itself: decodes; evaluation is bounded elsewhere.
  EXPECT_EQ(parse_all(section_with({0x0f, 0x03, 0x2f, 0xfd, 0xff})), "");
  // A branch into the middle of an op is rejected at decode time.
  EXPECT_NE(parse_all(section_with({0x0f, 0x03, 0x2f, 0xfe, 0xff})).find("expression"),
            std::string::npos);
  // Zero-length FDE: parsed, contributes no rows.
  EXPECT_EQ(parse_all(section_with({0x41}, 0)), "");
  // 65 nested remember_state.
  EXPECT_NE(parse_all(section_with(std::vector<uint8_t>(65, 0x0a))).find("too deep"),
            std::string::npos);
}

TEST(CfiHostile, SelfLoopingExpressionEvaluationIsBounded) {
  auto e = Expression::decode(std::vector<uint8_t>{0x2f, 0xfd, 0xff}); // skip -3: to itself
  ASSERT_TRUE(e) << e.error().to_string();
  RegisterState regs;
  NoMemory mem;
  auto v = e->evaluate(regs, mem);
  EXPECT_FALSE(v);
}

} // namespace
} // namespace ehelf

namespace ehelf {
namespace {

void put(std::vector<uint8_t>& v, uint64_t x, int bytes) {
  for (int i = 0; i < bytes; ++i)
    v.push_back(uint8_t(x >> (8 * i)));
}

// .debug_frame in the 64-bit DWARF format, CIE version 4 (address and segment sizes) and 3.
TEST(CfiReader, DebugFrame64BitDwarfAndVersions) {
  for (uint8_t version : {uint8_t(1), uint8_t(3), uint8_t(4)}) {
    std::vector<uint8_t> cie_body;
    put(cie_body, UINT64_MAX, 8); // CIE id in 64-bit .debug_frame
    cie_body.push_back(version);
    cie_body.push_back(0); // augmentation ""
    if (version == 4) {
      cie_body.push_back(8); // address size
      cie_body.push_back(0); // segment selector size
    }
    cie_body.push_back(1);    // code alignment
    cie_body.push_back(0x78); // data alignment -8
    cie_body.push_back(16);   // return address column (u8 in v1, ULEB in v3/4: same byte)
    for (uint8_t b : {0x0c, 0x07, 0x08, 0x90, 0x01})
      cie_body.push_back(b); // def_cfa rsp+8; rip@cfa-8
    std::vector<uint8_t> s;
    put(s, 0xffffffff, 4);
    put(s, cie_body.size(), 8);
    s.insert(s.end(), cie_body.begin(), cie_body.end());
    std::vector<uint8_t> fde_body;
    put(fde_body, 0, 8);      // CIE pointer: offset 0
    put(fde_body, 0x4000, 8); // pc_begin
    put(fde_body, 0x20, 8);   // pc_range
    for (uint8_t b : {0x41, 0x0e, 0x10, 0x86, 0x02})
      fde_body.push_back(b); // adv 1; cfa+16; rbp@-16
    size_t fde_at = s.size();
    put(s, 0xffffffff, 4);
    put(s, fde_body.size(), 8);
    s.insert(s.end(), fde_body.begin(), fde_body.end());

    PointerBases bases;
    CfiSection sec = parse_cfi_section(s, CfiFormat::DebugFrame, ".debug_frame", bases);
    ASSERT_FALSE(sec.error) << sec.error->to_string();
    ASSERT_EQ(sec.cies.size(), 1u);
    ASSERT_EQ(sec.fdes.size(), 1u);
    EXPECT_TRUE(sec.cies[0].dwarf64);
    EXPECT_EQ(sec.cies[0].version, version);
    EXPECT_EQ(sec.fdes[0].offset, fde_at);
    EXPECT_EQ(sec.fdes[0].pc_begin, 0x4000u);
    UnwindTable table;
    CfaInterpreter interp(table);
    std::vector<std::pair<uint64_t, int64_t>> rows;
    auto st = interp.run(sec, sec.cies[0], sec.fdes[0], bases, [&](const InterpretedRow& r) {
      rows.emplace_back(r.begin, r.state->cfa.offset);
    });
    ASSERT_TRUE(st) << st.error().to_string();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0], std::make_pair(uint64_t(0x4000), int64_t(8)));
    EXPECT_EQ(rows[1], std::make_pair(uint64_t(0x4001), int64_t(16)));
  }
}

} // namespace
} // namespace ehelf

namespace ehelf {
namespace {

// A program longer than the limits is refused with one error naming the section and the offset
// of the instruction where it went over, without decoding the whole program first; at the limit
// it is read.
TEST(CfiHostile, ProgramsPastTheLimitsAreRefused) {
  const size_t fde_program_at = small_cie().size() + 17; // the FDE's header and empty aug data
  const uint64_t max_insns = cfi_limits::kMaxInstructionsPerProgram;
  EXPECT_EQ(parse_all(section_with(std::vector<uint8_t>(max_insns, 0x00))), "");
  const std::string long_program =
      parse_all(section_with(std::vector<uint8_t>(max_insns + 1, 0x00)));
  EXPECT_EQ(long_program, fmt::format("<input>: .eh_frame+{:#x}: DW_CFA_nop: more than {} "
                                      "instructions in one program: refused",
                                      fde_program_at + max_insns, max_insns));
  // One row per advance_loc (the FDE covers them all): the row limit comes first.
  const uint64_t max_rows = cfi_limits::kMaxRowsPerFde;
  const uint32_t range = static_cast<uint32_t>(max_rows + 16);
  EXPECT_EQ(parse_all(section_with(std::vector<uint8_t>(max_rows - 1, 0x41), range)), "");
  EXPECT_EQ(parse_all(section_with(std::vector<uint8_t>(max_rows + 1, 0x41), range)),
            fmt::format("<input>: .eh_frame+{:#x}: DW_CFA_advance_loc: more than {} rows in one "
                        "FDE: refused",
                        fde_program_at + max_rows, max_rows));
}

// The largest tables on this machine are read whole, well under the limits (cfi_limits.hpp
// records these numbers): rows of the whole module at most a quarter of the limit, distinct
// rows at most a tenth.
TEST(CfiLimits, LargestLibrariesAreReadWhole) {
  size_t tried = 0;
  for (const char* path : {"/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1", "/usr/bin/python3.11",
                           "/usr/bin/gdb", "/usr/lib/chromium/chromium", test::libc_path()}) {
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path);
    ++tried;
    auto m = load_module_cfi(path);
    ASSERT_TRUE(m) << m.error().to_string();
    TableBuildStats stats;
    auto table = build_unwind_table(*m, &stats);
    ASSERT_TRUE(table) << table.error().to_string();
    std::printf("%s: %llu FDEs, %llu rows, %zu distinct\n", path,
                static_cast<unsigned long long>(stats.fdes),
                static_cast<unsigned long long>(stats.rows), table->row_count());
    EXPECT_LE(stats.rows * 4, cfi_limits::kMaxRowsPerModule);
    EXPECT_LE(table->row_count() * 10, cfi_limits::kMaxDistinctRowsPerModule);
  }
  if (tried == 0) GTEST_SKIP() << "none of the large libraries is installed";
}

} // namespace
} // namespace ehelf
