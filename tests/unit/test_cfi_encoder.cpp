// The CFI encoder: decode(encode(table)) gives the same row at every range boundary for this
// machine's main libraries and the fixtures, as .eh_frame and as .debug_frame, and readelf -wF
// reads the encoded image without a warning and prints the same rows as for the original; the
// image with the source's build id is the source's separate debug file for load_module_cfi.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "dwarf/cfi_encoder.hpp"
#include "dwarf/module_cfi.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

std::vector<std::string> modules() {
  std::vector<std::string> out = {test::libc_path(), "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                  "/usr/lib/x86_64-linux-gnu/libm.so.6",
                                  "/lib64/ld-linux-x86-64.so.2"};
  for (const char* f :
       {"recursion", "cfi_variety", "cfi_variety_hdr", "exceptions", "stack_target"})
    out.push_back(std::string(EHELF_FIXTURE_DIR) + "/" + f);
  return out;
}

// A row as comparable text: expression indices differ between tables, their bytes do not.
std::string row_text(const UnwindTable& t, const TableRange* r) {
  if (!r) return "none";
  std::ostringstream s;
  const RowView row = t.row(r->row);
  auto expr = [&](uint32_t e) {
    std::string b;
    if (e == kNoExpression) return b;
    for (uint8_t c : t.expression(e).bytes())
      b += std::to_string(c) + ",";
    return b;
  };
  s << int(row.cfa.kind) << ":" << row.cfa.reg << "+" << row.cfa.offset << expr(row.cfa.expr);
  for (const ColumnRule& c : row.columns)
    s << " " << c.column << "=" << int(c.rule.kind) << ":" << c.rule.reg << ":" << c.rule.offset
      << expr(c.rule.expr);
  const FunctionInfo& f = t.function(r->function);
  s << " args=" << r->args_size << " ra=" << f.return_column << " S=" << f.signal_frame;
  return s.str();
}

// The table of `path`'s .eh_frame (`format` EhFrame) or .debug_frame.
UnwindTable load_table(const std::string& path, CfiFormat format = CfiFormat::EhFrame) {
  LoadOptions o;
  o.eh_frame = format == CfiFormat::EhFrame;
  o.debug_frame = format == CfiFormat::DebugFrame;
  o.separate_debug_file = false;
  auto m = load_module_cfi(path, o);
  EXPECT_TRUE(m) << path << ": " << (m ? "" : m.error().message);
  auto t = build_unwind_table(*m);
  EXPECT_TRUE(t) << path << ": " << (t ? "" : t.error().message);
  return t ? std::move(*t) : UnwindTable{};
}

std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() /
          (stem + "." + std::to_string(::getpid()) + ".elf"))
      .string();
}

const CfiFormat kFormats[] = {CfiFormat::EhFrame, CfiFormat::DebugFrame};

const char* format_name(CfiFormat f) {
  return f == CfiFormat::EhFrame ? ".eh_frame" : ".debug_frame";
}

std::vector<uint8_t> encode_image(const UnwindTable& table, CfiFormat format) {
  CfiElfOptions o;
  o.format = format;
  auto image = encode_cfi_elf(table, o);
  EXPECT_TRUE(image) << image.error().message;
  return image ? std::move(*image) : std::vector<uint8_t>{};
}

TEST(CfiEncoder, RoundTripsEveryRangeBoundary) {
  for (CfiFormat format : kFormats)
    for (const std::string& path : modules()) {
      SCOPED_TRACE(path + " as " + format_name(format));
      const UnwindTable original = load_table(path);
      ASSERT_GT(original.ranges().size(), 0u);
      const std::string out = temp_path("cfi_encoder");
      test::write_file(out, encode_image(original, format));
      auto m = load_module_cfi(out);
      ASSERT_TRUE(m) << m.error().message;
      if (format == CfiFormat::EhFrame) {
        ASSERT_TRUE(m->eh_frame_hdr) << "no .eh_frame_hdr";
        EXPECT_TRUE(m->eh_frame_hdr_problems.empty()) << m->eh_frame_hdr_problems.front();
      } else {
        ASSERT_FALSE(m->eh_frame);
        ASSERT_TRUE(m->debug_frame);
        // As gcc and gas write it for x86_64.
        for (const Cie& cie : m->debug_frame->cies) {
          EXPECT_EQ(cie.version, 1);
          EXPECT_EQ(cie.code_align, 1u);
          EXPECT_EQ(cie.data_align, -8);
        }
      }
      const UnwindTable decoded = load_table(out, format);
      std::filesystem::remove(out);
      size_t checked = 0;
      for (const UnwindTable* t : {&original, &decoded})
        for (const TableRange& r : t->ranges())
          for (uint64_t pc : {r.begin, r.end - 1, r.end}) {
            ASSERT_EQ(row_text(original, original.find(pc)), row_text(decoded, decoded.find(pc)))
                << "at " << std::hex << pc;
            ++checked;
          }
      EXPECT_GT(checked, 0u);
    }
}

// readelf -wF's rows: FDE range -> (location -> column name -> rule), "u" dropped.
using ReadelfRows =
    std::map<uint64_t, std::pair<uint64_t, std::map<uint64_t, std::map<std::string, std::string>>>>;

ReadelfRows parse_readelf(const std::string& text) {
  ReadelfRows out;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header;
  std::map<uint64_t, std::map<std::string, std::string>>* rows = nullptr;
  while (std::getline(in, line)) {
    if (auto p = line.find(" FDE cie="); p != std::string::npos) {
      const auto pc = line.find("pc=", p);
      const auto dots = line.find("..", pc);
      const uint64_t begin = std::stoull(line.substr(pc + 3, dots - pc - 3), nullptr, 16);
      const uint64_t end = std::stoull(line.substr(dots + 2), nullptr, 16);
      rows = &out[begin].second;
      out[begin].first = end;
      header.clear();
      continue;
    }
    if (line.find(" CIE") != std::string::npos && line.find(" FDE") == std::string::npos) {
      rows = nullptr; // the CIE's own initial row is not a row of the FDE before it
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;)
      w.push_back(x);
    if (w.empty()) continue;
    if (w[0] == "LOC") {
      header = w;
      continue;
    }
    if (!rows || header.empty() || w.size() != header.size()) continue;
    auto& row = (*rows)[std::stoull(w[0], nullptr, 16)];
    for (size_t i = 1; i < w.size(); ++i)
      if (w[i] != "u") row[header[i]] = w[i];
  }
  return out;
}

std::string readelf_row(const ReadelfRows& rows, uint64_t pc) {
  auto f = rows.upper_bound(pc);
  if (f == rows.begin()) return "none";
  --f;
  if (pc >= f->second.first) return "none";
  auto r = f->second.second.upper_bound(pc);
  if (r == f->second.second.begin()) return "empty";
  --r;
  std::string s;
  for (const auto& [col, rule] : r->second)
    s += col + "=" + rule + " ";
  return s;
}

TEST(CfiEncoder, ReadelfReadsTheImageAndPrintsTheSameRows) {
  for (CfiFormat format : kFormats)
    for (const std::string& path :
         {std::string(test::libc_path()), std::string(EHELF_FIXTURE_DIR) + "/cfi_variety",
          std::string(EHELF_FIXTURE_DIR) + "/exceptions"}) {
      SCOPED_TRACE(path + " as " + format_name(format));
      const std::string out = temp_path("cfi_encoder_readelf");
      test::write_file(out, encode_image(load_table(path), format));
      const std::string warnings = test::run_command("readelf -wF " + out + " 2>&1 >/dev/null");
      const ReadelfRows mine =
          parse_readelf(test::run_command("readelf -wF " + out + " 2>/dev/null"));
      const ReadelfRows theirs =
          parse_readelf(test::run_command("readelf -wF " + path + " 2>/dev/null"));
      std::filesystem::remove(out);
      EXPECT_EQ(warnings, "");
      ASSERT_GT(mine.size(), 0u);
      size_t checked = 0;
      for (const ReadelfRows* rows : {&mine, &theirs})
        for (const auto& [begin, fde] : *rows)
          for (const auto& [loc, row] : fde.second) {
            // readelf prints no row at all for an FDE that sets rules without advancing (the
            // entry point's `undefined rip`): nothing to compare there.
            const std::string a = readelf_row(theirs, loc), b = readelf_row(mine, loc);
            if (a == "empty" || b == "empty") continue;
            ASSERT_EQ(a, b) << "at " << std::hex << loc;
            ++checked;
          }
      EXPECT_GT(checked, 20u);
    }
}

} // namespace
} // namespace ehelf

namespace ehelf {
namespace {

// A copy of a fixture stripped of its tables finds them in its separate debug file, the encoded
// image with the fixture's build id at DIR/.build-id/xx/yyyy.debug: the .eh_frame one when
// separate_eh_frame asks for it, the .debug_frame one as any debug file's; a debug file whose
// build id is another file's is not used.
TEST(CfiEncoder, ImageWithTheBuildIdIsTheSeparateDebugFile) {
  const std::string source = std::string(EHELF_FIXTURE_DIR) + "/recursion";
  auto elf = ElfFile::open(source);
  ASSERT_TRUE(elf);
  const std::string id = (*elf)->build_id_hex();
  ASSERT_GT(id.size(), 2u) << "the fixture has no build id";
  const UnwindTable original = load_table(source);
  test::TempDir dir;
  const std::string stripped = (dir.path / "recursion").string();
  test::run_command("objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr " + source +
                    " " + stripped);
  std::filesystem::create_directories(dir.path / "debug/.build-id" / id.substr(0, 2));
  const std::string installed =
      (dir.path / "debug/.build-id" / id.substr(0, 2) / (id.substr(2) + ".debug")).string();
  LoadOptions lo;
  lo.separate_eh_frame = true;
  lo.debug_dirs = {(dir.path / "debug").string()};
  for (CfiFormat format : kFormats) {
    SCOPED_TRACE(format_name(format));
    CfiElfOptions eo;
    eo.format = format;
    eo.source = elf->get();
    auto image = encode_cfi_elf(original, eo);
    ASSERT_TRUE(image) << image.error().message;
    test::write_file(installed, *image);
    auto m = load_module_cfi(stripped, lo);
    ASSERT_TRUE(m) << m.error().message;
    ASSERT_TRUE(m->debug_elf);
    EXPECT_EQ(m->debug_elf->name(), installed);
    auto decoded = build_unwind_table(*m);
    ASSERT_TRUE(decoded) << decoded.error().message;
    ASSERT_EQ(decoded->ranges().size(), original.ranges().size());
    for (const TableRange& r : original.ranges())
      ASSERT_EQ(row_text(original, &r), row_text(*decoded, decoded->find(r.begin)));
    // Not without asking (readelf's view: no .eh_frame from debug files).
    if (format == CfiFormat::EhFrame) {
      LoadOptions plain = lo;
      plain.separate_eh_frame = false;
      auto p = load_module_cfi(stripped, plain);
      ASSERT_TRUE(p);
      EXPECT_FALSE(p->has_tables());
    }
  }
  // Another file's debug file at this build id's place: refused.
  auto other_file = ElfFile::open(std::string(EHELF_FIXTURE_DIR) + "/stack_target");
  ASSERT_TRUE(other_file);
  ASSERT_NE((*other_file)->build_id_hex(), id);
  CfiElfOptions eo;
  eo.source = other_file->get();
  auto other = encode_cfi_elf(original, eo);
  ASSERT_TRUE(other);
  test::write_file(installed, *other);
  auto m = load_module_cfi(stripped, lo);
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->has_tables());
  EXPECT_FALSE(m->debug_elf);
}

// A row DWARF cannot express (a save 20 bytes below the CFA; data alignment -8) fails the
// encoding, or with `left_out` leaves out that FDE only, with its CIE when no other FDE uses it
// (a signal frame's here), and lists it: the other function's rows decode as they were.
TEST(CfiEncoder, LeavesOutAnFdeWithARowItCannotEncode) {
  UnwindTable table;
  FunctionInfo odd{.pc_begin = 0x1000, .pc_end = 0x1010};
  odd.signal_frame = true;
  const uint32_t f_odd = table.add_function(odd);
  const uint32_t f_fine = table.add_function(FunctionInfo{.pc_begin = 0x1010, .pc_end = 0x1020});
  const CfaRule rsp8{CfaRule::Kind::RegOffset, x86_64::RSP, 8};
  const CfaRule rsp16{CfaRule::Kind::RegOffset, x86_64::RSP, 16};
  const ColumnRule ra{x86_64::RIP, {RegisterRule::Kind::Offset, 0, -8}};
  const std::vector<ColumnRule> entry = {ra};
  const std::vector<ColumnRule> odd_save = {{x86_64::RBX, {RegisterRule::Kind::Offset, 0, -20}},
                                            ra};
  const std::vector<ColumnRule> save = {{x86_64::RBX, {RegisterRule::Kind::Offset, 0, -16}}, ra};
  table.add_range({0x1000, 0x1004, table.intern_row(rsp8, entry), f_odd, 0});
  table.add_range({0x1004, 0x1010, table.intern_row(rsp16, odd_save), f_odd, 0});
  table.add_range({0x1010, 0x1011, table.intern_row(rsp8, entry), f_fine, 0});
  table.add_range({0x1011, 0x1020, table.intern_row(rsp16, save), f_fine, 0});
  table.finish();
  for (CfiFormat format : kFormats) {
    SCOPED_TRACE(format_name(format));
    auto refused = encode_cfi(table, format);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("0x1004"), std::string::npos) << refused.error().message;
    std::vector<LeftOutFde> left_out;
    CfiElfOptions o;
    o.format = format;
    o.left_out = &left_out;
    auto image = encode_cfi_elf(table, o);
    ASSERT_TRUE(image) << image.error().message;
    ASSERT_EQ(left_out.size(), 1u);
    EXPECT_EQ(left_out[0].function, f_odd);
    EXPECT_EQ(left_out[0].begin, 0x1000u);
    EXPECT_NE(left_out[0].why.message.find("not a multiple of 8"), std::string::npos);
    const std::string out = temp_path("cfi_encoder_left_out");
    test::write_file(out, *image);
    auto m = load_module_cfi(out);
    ASSERT_TRUE(m) << m.error().message;
    const auto& section = format == CfiFormat::EhFrame ? m->eh_frame : m->debug_frame;
    ASSERT_TRUE(section);
    EXPECT_EQ(section->cies.size(), 1u); // the signal frame's CIE went with its FDE
    const UnwindTable decoded = load_table(out, format);
    std::filesystem::remove(out);
    for (uint64_t pc : {0x1000, 0x1004, 0x100f})
      EXPECT_EQ(decoded.find(pc), nullptr) << std::hex << pc;
    for (uint64_t pc : {0x1010, 0x1011, 0x101f})
      EXPECT_EQ(row_text(table, table.find(pc)), row_text(decoded, decoded.find(pc)))
          << std::hex << pc;
  }
}

} // namespace
} // namespace ehelf
