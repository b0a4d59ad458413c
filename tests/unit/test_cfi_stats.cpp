// CfiStats (ehelf stats) against an independent oracle: readelf's raw, uninterpreted dump of the
// call-frame instructions (`readelf -wN --debug-dump=frames`), parsed here.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "dwarf/constants.hpp"
#include "report/cfi_stats_text.hpp"

namespace ehelf {
namespace {

namespace fs = std::filesystem;

const std::string kLibc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const std::string kLibstdcxx = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
const std::string kPltExpression = "DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; DW_OP_lit15; "
                                   "DW_OP_and; DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; "
                                   "DW_OP_plus";

using test::run_command;

bool have_readelf() {
  return std::system("readelf --version >/dev/null 2>&1") == 0;
}

// What the oracle derives from readelf's text.
struct ReadelfFacts {
  std::map<std::string, uint64_t> opcodes;        // "DW_CFA_offset" -> count
  std::array<std::array<uint64_t, 8>, 2> kinds{}; // [row][RegisterRule kind], as in the header
  std::array<uint64_t, 2> cfa_offset{};           // def_cfa, _sf, _register, _offset, _offset_sf
  std::array<uint64_t, 2> cfa_expression{};
  std::map<std::string, uint64_t> expressions; // readelf text -> uses
  uint64_t cies = 0, fdes = 0;
};

// Parses the dump. Register rules follow the convention documented in cfi_stats.hpp: restore
// counts as the kind the CIE gave the column, or same_value if it gave none.
ReadelfFacts readelf_facts(const std::string& file) {
  ReadelfFacts f;
  std::string text = run_command("readelf -wN --debug-dump=frames '" + file + "' 2>/dev/null");
  std::istringstream in(text);
  std::string line;
  const std::set<unsigned> tracked = {16, 7, 6, 3};
  std::string section;
  std::map<std::string, std::map<unsigned, int>> cie_columns; // section+offset -> column -> kind
  std::map<unsigned, int>* current_cie = nullptr;             // when in a CIE
  const std::map<unsigned, int>* fde_cie = nullptr;           // when in an FDE
  enum { Undefined, SameValue, Offset, ValOffset, Register, Expression, ValExpression };
  auto count = [&](unsigned reg, int kind) {
    f.kinds[1][kind]++;
    if (tracked.count(reg)) f.kinds[0][kind]++;
    if (current_cie) (*current_cie)[reg] = kind;
  };
  while (std::getline(in, line)) {
    if (line.rfind("Contents of the ", 0) == 0) {
      section = line;
      current_cie = nullptr;
      fde_cie = nullptr;
      continue;
    }
    // Entry headers: "00000018 0000000000000024 0000001c FDE cie=00000000 pc=..." or "... CIE".
    std::vector<std::string> words;
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0]))) {
      std::istringstream ws(line);
      for (std::string w; ws >> w;)
        words.push_back(w);
    }
    if (words.size() >= 4 && words[3] == "CIE") {
      ++f.cies;
      current_cie = &cie_columns[section + words[0]];
      fde_cie = nullptr;
      continue;
    }
    if (words.size() >= 5 && words[3] == "FDE" && words[4].rfind("cie=", 0) == 0) {
      ++f.fdes;
      current_cie = nullptr;
      static const std::map<unsigned, int> none;
      auto it = cie_columns.find(section + words[4].substr(4));
      fde_cie = it == cie_columns.end() ? &none : &it->second;
      continue;
    }
    // Instructions: "  DW_CFA_offset: r16 (rip) at cfa-8", "  DW_CFA_nop", ...
    if (line.rfind("  DW_CFA_", 0) != 0) continue;
    size_t end = 2;
    while (end < line.size() &&
           (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_'))
      ++end;
    std::string name = line.substr(2, end - 2);
    f.opcodes[name]++;
    if (auto p = line.find("(DW_OP"); p != std::string::npos) {
      auto q = line.rfind(')');
      f.expressions[line.substr(p + 1, q - p - 1)]++;
    }
    if (name.rfind("DW_CFA_def_cfa", 0) == 0) {
      int row_kind = name == "DW_CFA_def_cfa_expression" ? 1 : 0;
      for (int row : {0, 1})
        (row_kind ? f.cfa_expression : f.cfa_offset)[row]++;
      continue;
    }
    // The register operand: ": rN (name)".
    if (line.compare(end, 3, ": r") != 0) continue;
    size_t digits = end + 3;
    while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits])))
      ++digits;
    if (digits == end + 3 || digits >= line.size() || line[digits] != ' ') continue;
    unsigned reg = static_cast<unsigned>(std::stoul(line.substr(end + 3, digits - end - 3)));
    if (name == "DW_CFA_offset" || name == "DW_CFA_offset_extended" ||
        name == "DW_CFA_offset_extended_sf" || name == "DW_CFA_GNU_negative_offset_extended")
      count(reg, Offset);
    else if (name == "DW_CFA_val_offset" || name == "DW_CFA_val_offset_sf")
      count(reg, ValOffset);
    else if (name == "DW_CFA_undefined")
      count(reg, Undefined);
    else if (name == "DW_CFA_same_value")
      count(reg, SameValue);
    else if (name == "DW_CFA_register")
      count(reg, Register);
    else if (name == "DW_CFA_expression")
      count(reg, Expression);
    else if (name == "DW_CFA_val_expression")
      count(reg, ValExpression);
    else if (name == "DW_CFA_restore" || name == "DW_CFA_restore_extended") {
      int kind = SameValue;
      if (fde_cie)
        if (auto it = fde_cie->find(reg); it != fde_cie->end()) kind = it->second;
      f.kinds[1][kind]++;
      if (tracked.count(reg)) f.kinds[0][kind]++;
      if (current_cie) current_cie->erase(reg);
    }
  }
  return f;
}

CfiStats stats_of(const std::vector<std::string>& files, const StatsOptions& opt = {}) {
  CfiStats s;
  for (const auto& f : files)
    s.add_file(f, opt);
  return s;
}

std::map<std::string, uint64_t> opcode_map(const CfiStats& s) {
  std::map<std::string, uint64_t> out;
  for (unsigned op = 0; op < 256; ++op)
    if (s.cfa_opcodes[op])
      out[std::string(dw::cfa_name(static_cast<uint8_t>(op)))] += s.cfa_opcodes[op];
  return out;
}

class StatsOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(StatsOracle, OpcodeHistogramMatchesReadelf) {
  if (!have_readelf() || !fs::exists(GetParam())) GTEST_SKIP() << "needs readelf and the file";
  CfiStats s = stats_of({GetParam()});
  ASSERT_TRUE(s.errors.empty()) << s.errors[0].file << ": " << s.errors[0].message;
  ASSERT_EQ(s.files_scanned, 1u);
  ReadelfFacts f = readelf_facts(GetParam());
  ASSERT_FALSE(f.opcodes.empty());
  EXPECT_EQ(opcode_map(s), f.opcodes);
  uint64_t total = 0;
  for (auto& [n, c] : f.opcodes)
    total += c;
  EXPECT_EQ(s.instructions, total);
  EXPECT_EQ(s.cies, f.cies);
  EXPECT_EQ(s.fdes, f.fdes);
}

TEST_P(StatsOracle, RuleKindsMatchReadelf) {
  if (!have_readelf() || !fs::exists(GetParam())) GTEST_SKIP() << "needs readelf and the file";
  CfiStats s = stats_of({GetParam()});
  ReadelfFacts f = readelf_facts(GetParam());
  for (unsigned row : {kOnlySupported, kAllColumns}) {
    SCOPED_TRACE(row == kOnlySupported ? "Only supp." : "All columns");
    for (unsigned k = 0; k < 8; ++k)
      EXPECT_EQ(s.rules[row].seen[k], f.kinds[row][k])
          << rule_class_name(static_cast<RuleClass>(k));
    EXPECT_EQ(s.rules[row].seen[static_cast<unsigned>(RuleClass::CfaOffset)], f.cfa_offset[row]);
    EXPECT_EQ(s.rules[row].seen[static_cast<unsigned>(RuleClass::CfaExpression)],
              f.cfa_expression[row]);
  }
  // Every CFA reg+offset instruction is filed under some register.
  uint64_t by_reg = 0;
  for (uint64_t v : s.cfa_registers)
    by_reg += v;
  EXPECT_EQ(by_reg, f.cfa_offset[1]);
}

TEST_P(StatsOracle, ExpressionsMatchReadelf) {
  if (!have_readelf() || !fs::exists(GetParam())) GTEST_SKIP() << "needs readelf and the file";
  CfiStats s = stats_of({GetParam()});
  ReadelfFacts f = readelf_facts(GetParam());
  std::map<std::string, uint64_t> mine;
  for (const auto& [text, e] : s.expressions)
    mine[text] = e.total();
  EXPECT_EQ(mine, f.expressions);
  uint64_t uses = 0;
  for (auto& [t, n] : f.expressions)
    uses += n;
  EXPECT_EQ(s.rules[kAllColumns].expressions_seen(), uses);
}

INSTANTIATE_TEST_SUITE_P(SystemLibraries, StatsOracle, ::testing::Values(kLibc, kLibstdcxx),
                         [](const auto& info) {
                           return info.index == 0 ? std::string("libc") : std::string("libstdcxx");
                         });

TEST(CfiStats, FindsPltExpressionInLibc) {
  if (!fs::exists(kLibc)) GTEST_SKIP();
  CfiStats s = stats_of({kLibc});
  auto it = s.expressions.find(kPltExpression);
  ASSERT_NE(it, s.expressions.end());
  EXPECT_EQ(it->second.shape, ExprShape::Plt);
  EXPECT_GE(it->second.uses[0], 1u);
  EXPECT_EQ(it->second.supported, it->second.total());
  auto top = s.top_expressions(50);
  EXPECT_TRUE(
      std::any_of(top.begin(), top.end(), [](const auto& p) { return p.first == kPltExpression; }));
  // The paper's observation: nearly all rules are supported in libc.
  const RuleCounts& rc = s.rules[kOnlySupported];
  EXPECT_GT(rc.rules_seen(), 10000u);
  EXPECT_LT(rc.rules_unsupported() * 100, rc.rules_seen());
  EXPECT_EQ(s.rules[kAllColumns].seen[static_cast<unsigned>(RuleClass::Architectural)], 0u);
  // Rows: one bucket per FDE that ran.
  uint64_t bucketed = 0;
  for (uint64_t v : s.rows_per_fde)
    bucketed += v;
  EXPECT_EQ(bucketed + s.fde_errors, s.fdes);
  EXPECT_GT(s.rows, s.fdes);
}

TEST(CfiStats, SupportedSetChangesTable3) {
  if (!fs::exists(kLibc)) GTEST_SKIP();
  auto none = StatsOptions::parse_supported("");
  ASSERT_TRUE(none);
  StatsOptions opt;
  opt.supported = *none;
  CfiStats s = stats_of({kLibc}, opt);
  for (unsigned row : {kOnlySupported, kAllColumns}) {
    EXPECT_EQ(s.rules[row].rules_unsupported(), s.rules[row].rules_seen());
    EXPECT_EQ(s.rules[row].expressions_unsupported(), s.rules[row].expressions_seen());
  }
  EXPECT_EQ(s.files_with_unsupported_rules[kAllColumns], 1u);

  // Only offset: the CFA rules and everything else become unsupported.
  opt.supported = EHELF_OK(StatsOptions::parse_supported("offset"));
  CfiStats o = stats_of({kLibc}, opt);
  const RuleCounts& rc = o.rules[kAllColumns];
  EXPECT_EQ(rc.rules_seen() - rc.rules_unsupported(),
            rc.seen[static_cast<unsigned>(RuleClass::Offset)] -
                rc.unsupported[static_cast<unsigned>(RuleClass::Offset)]);
  EXPECT_EQ(rc.unsupported[static_cast<unsigned>(RuleClass::CfaOffset)],
            rc.seen[static_cast<unsigned>(RuleClass::CfaOffset)]);
  // Same counts whatever the set.
  CfiStats d = stats_of({kLibc});
  for (unsigned row : {kOnlySupported, kAllColumns})
    EXPECT_EQ(d.rules[row].seen, o.rules[row].seen);
}

TEST(CfiStats, ParsesSupportedTokens) {
  auto s = StatsOptions::parse_supported("offset, cfa_offset,plt");
  ASSERT_TRUE(s);
  EXPECT_EQ(StatsOptions::supported_to_string(*s), "offset,cfa_offset,plt");
  auto bad = StatsOptions::parse_supported("offset,bogus");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bogus"), std::string::npos);
  auto def = StatsOptions::parse_supported(
      StatsOptions::supported_to_string(StatsOptions::default_supported()));
  ASSERT_TRUE(def);
  EXPECT_EQ(*def, StatsOptions::default_supported());
}

std::vector<std::string> some_system_libraries(size_t n) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/x86_64-linux-gnu", ec)) {
    if (!e.is_regular_file(ec) || e.is_symlink(ec)) continue;
    std::string name = e.path().filename().string();
    if (name.find(".so") == std::string::npos) continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  if (out.size() > n) out.resize(n);
  return out;
}

TEST(CfiStats, MergeOfHalvesEqualsOnePass) {
  std::vector<std::string> files = some_system_libraries(24);
  if (fs::exists(kLibc)) files.push_back(kLibc);
  if (files.size() < 2) GTEST_SKIP();
  StatsOptions opt;
  CfiStats one = stats_of(files, opt);
  CfiStats a, b;
  for (size_t i = 0; i < files.size(); ++i)
    (i % 2 ? b : a).add_file(files[i], opt);
  EXPECT_NE(a, one);
  CfiStats merged = a;
  merged.merge(b);
  // Errors come in another order when interleaved; the rest must be identical.
  std::sort(one.errors.begin(), one.errors.end());
  std::sort(merged.errors.begin(), merged.errors.end());
  EXPECT_TRUE(merged == one);
  EXPECT_EQ(merged.instructions, one.instructions);
  EXPECT_EQ(merged.expressions, one.expressions);
  StatsReport r;
  EXPECT_EQ(stats_to_json(merged, opt, r), stats_to_json(one, opt, r));
  EXPECT_EQ(render_stats_text(merged, opt, r), render_stats_text(one, opt, r));
  // Merging into an empty one is the identity.
  CfiStats empty;
  empty.merge(one);
  EXPECT_TRUE(empty == one);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/ehelf_stats_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream o(p, std::ios::binary);
  o << bytes;
}

std::string elf_header(unsigned char cls, unsigned char data, uint16_t machine, size_t size) {
  std::string h(size, '\0');
  h[0] = 0x7f, h[1] = 'E', h[2] = 'L', h[3] = 'F';
  h[4] = static_cast<char>(cls);
  h[5] = static_cast<char>(data);
  h[6] = 1;
  h[16] = 3; // ET_DYN
  h[18] = static_cast<char>(machine & 0xff);
  h[19] = static_cast<char>(machine >> 8);
  return h;
}

TEST(CfiStats, SkipsNonElfAndCountsOtherClasses) {
  TempDir d;
  write_file(d.path / "text.txt", "just some text, not an ELF file\n");
  write_file(d.path / "empty", "");
  write_file(d.path / "elf32", elf_header(1, 1, 3 /*EM_386*/, 64));
  write_file(d.path / "aarch64", elf_header(2, 1, 183 /*EM_AARCH64*/, 64));
  write_file(d.path / "broken", elf_header(2, 1, 62 /*EM_X86_64*/, 64) + std::string(16, '\xff'));
  write_file(d.path / "short", std::string("\x7f"
                                           "ELF\x02",
                                           5));
  CfiStats s;
  StatsOptions opt;
  for (const char* n : {"text.txt", "empty", "elf32", "aarch64", "broken", "short"})
    s.add_file((d.path / n).string(), opt);
  EXPECT_EQ(s.files_not_elf, 2u);
  EXPECT_EQ(s.files_elf32, 1u);
  EXPECT_EQ(s.files_other_arch, 1u);
  EXPECT_EQ(s.files_scanned + s.files_failed, 2u);
  EXPECT_GE(s.files_failed, 1u); // "short" at least; "broken" has a nonsense header
  ASSERT_EQ(s.errors.size(), s.files_failed);
  for (const auto& e : s.errors)
    EXPECT_FALSE(e.message.empty()) << e.file;
  s.add_file((d.path / "missing").string(), opt);
  EXPECT_EQ(s.errors.back().file, (d.path / "missing").string());
  std::string text = render_stats_text(s, opt, {});
  EXPECT_NE(text.find("Errors ("), std::string::npos);
  EXPECT_NE(text.find("missing"), std::string::npos);
  auto text_kind = classify_elf_file((d.path / "text.txt").string());
  ASSERT_TRUE(text_kind);
  EXPECT_EQ(*text_kind, ElfKind::NotElf);
  auto missing_kind = classify_elf_file((d.path / "missing").string());
  ASSERT_FALSE(missing_kind);
  EXPECT_EQ(missing_kind.error().message, "cannot open: No such file or directory");
  if (fs::exists(kLibc)) {
    auto libc_kind = classify_elf_file(kLibc);
    ASSERT_TRUE(libc_kind);
    EXPECT_EQ(*libc_kind, ElfKind::X86_64);
  }
}

TEST(CfiStats, TextHasThePapersTables) {
  if (!fs::exists(kLibc)) GTEST_SKIP();
  StatsOptions opt;
  CfiStats s = stats_of({kLibc}, opt);
  StatsReport r;
  r.top = 3;
  std::string text = render_stats_text(s, opt, r);
  for (const char* h : {"Table 3",
                        "Unsupported register rule",
                        "Register rules seen",
                        "% supp.",
                        "Unsupported expression",
                        "Expressions seen",
                        "Table 4",
                        "Undefined",
                        "Same_value",
                        "Offset",
                        "Val_offset",
                        "Register",
                        "Expression",
                        "Val_expression",
                        "Architectural",
                        "Total",
                        "Only supp.",
                        "All columns",
                        "DW_CFA_def_cfa_offset",
                        "Rows per FDE",
                        "DW_OP_breg7"})
    EXPECT_NE(text.find(h), std::string::npos) << h;
  auto j = stats_to_json(s, opt, r);
  EXPECT_EQ(j["table3"]["all_columns"]["register_rules_seen"].get<uint64_t>(),
            s.rules[kAllColumns].rules_seen());
  EXPECT_EQ(j["table4"]["only_supported"]["offset"].get<uint64_t>(),
            s.rules[kOnlySupported].seen[static_cast<unsigned>(RuleClass::Offset)]);
  EXPECT_EQ(j["cfa_opcodes"]["DW_CFA_def_cfa_offset"].get<uint64_t>(),
            s.cfa_opcodes[dw::CFA_def_cfa_offset]);
  EXPECT_EQ(j["top_expressions"].size(), 3u);
  EXPECT_EQ(j["files"]["scanned"].get<uint64_t>(), 1u);
}

TEST(CfiStats, CliWalksDirectories) {
  fs::path bin = fs::path(EHELF_BIN_DIR) / "ehelf";
  if (!fs::exists(bin) || !fs::exists(kLibc) || !fs::exists(kLibstdcxx))
    GTEST_SKIP() << "needs " << bin;
  TempDir d;
  fs::create_directories(d.path / "sub" / "deeper");
  fs::create_symlink(kLibc, d.path / "libc.so.6");
  fs::create_symlink(kLibc, d.path / "sub" / "libc-again.so"); // the same file: counted once
  fs::create_symlink(kLibstdcxx, d.path / "sub" / "deeper" / "libstdc++.so.6");
  fs::create_directory_symlink(d.path / "sub", d.path / "loop"); // not followed
  fs::create_symlink(d.path / "nowhere", d.path / "dangling");
  write_file(d.path / "sub" / "README", "not ELF\n");
  std::string out = run_command("'" + bin.string() + "' stats --json --no-progress '" +
                                d.path.string() + "' 2>/dev/null");
  ASSERT_FALSE(out.empty());
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["files"]["scanned"].get<uint64_t>(), 2u);
  EXPECT_EQ(j["files"]["not_elf"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["files"]["failed"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["threads"].get<unsigned>(), 2u);
  CfiStats s = stats_of({kLibc, kLibstdcxx});
  EXPECT_EQ(j["instructions"].get<uint64_t>(), s.instructions);
  EXPECT_EQ(j["table3"]["only_supported"]["register_rules_seen"].get<uint64_t>(),
            s.rules[kOnlySupported].rules_seen());
  EXPECT_EQ(j["rows"].get<uint64_t>(), s.rows);

  // Text output, a single file, one thread, a custom supported set.
  std::string text = run_command("'" + bin.string() + "' stats -j1 --supported=offset '" + kLibc +
                                 "' 2>/dev/null");
  EXPECT_NE(text.find("Table 3"), std::string::npos);
  EXPECT_NE(text.find("Supported set: offset;"), std::string::npos);
  EXPECT_NE(text.find("1 thread)"), std::string::npos);
}

} // namespace
} // namespace ehelf
