// The ELF reader on real files and on malformed ones.
#include <gtest/gtest.h>

#include <unistd.h>

#include "dwarf/module_cfi.hpp"
#include "elf/elf_file.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

TEST(ElfFile, LibcSectionsBuildIdAndSymbols) {
  auto elf = ElfFile::open(test::libc_path());
  ASSERT_TRUE(elf) << elf.error().to_string();
  EXPECT_NE((*elf)->find_section(".eh_frame"), nullptr);
  EXPECT_NE((*elf)->find_section(".eh_frame_hdr"), nullptr);
  std::string notes = test::run_command(std::string("readelf -n ") + test::libc_path());
  ASSERT_FALSE((*elf)->build_id_hex().empty());
  EXPECT_NE(notes.find("Build ID: " + (*elf)->build_id_hex()), std::string::npos);
  const Symbol* s = nullptr;
  for (const Symbol& sym : (*elf)->symbols())
    if (sym.name == "memcpy") s = &sym;
  ASSERT_NE(s, nullptr);
  EXPECT_EQ((*elf)->symbol_for(s->value + 1)->value, s->value);
}

// PLT entries named as perf and objdump name them ("getenv@plt"), in a .plt.sec file (IBT:
// libsqlite3) and a plain .plt one (the fixture, built without IBT): every label objdump prints
// in the PLT sections, at its first and last byte.
// libc's .rela.plt lists its IRELATIVE relocations (its own ifuncs, "*ABS*+0x9f550@plt") after
// the others, not in its PLT's order: each entry is named by the slot it jumps through.
TEST(ElfFile, PltEntriesAreNamedAsObjdumpNamesThem) {
  size_t without_symbol = 0;
  for (const std::string& path :
       {std::string("/usr/lib/x86_64-linux-gnu/libsqlite3.so.0"), std::string("/usr/bin/ls"),
        std::string("/usr/lib/x86_64-linux-gnu/libc.so.6"),
        std::string(EHELF_FIXTURE_DIR) + "/recursion"}) {
    if (::access(path.c_str(), R_OK) != 0) continue;
    SCOPED_TRACE(path);
    auto elf = ElfFile::open(path);
    ASSERT_TRUE(elf) << elf.error().to_string();
    const std::string out =
        test::run_command("objdump -d -j .plt -j .plt.sec " + path + " 2>/dev/null");
    size_t labels = 0;
    for (size_t at = out.find("@plt>:\n"); at != std::string::npos;
         at = out.find("@plt>:\n", at + 1)) {
      const size_t line = out.rfind('\n', at) + 1;
      const uint64_t addr = std::stoull(out.substr(line, 16), nullptr, 16);
      const size_t open = out.find('<', line);
      const std::string name = out.substr(open + 1, at + 4 - open - 1);
      if (name.starts_with("*ABS*+0x")) ++without_symbol;
      for (uint64_t pc : {addr, addr + 15}) {
        const Symbol* s = (*elf)->plt_symbol_for(pc);
        ASSERT_NE(s, nullptr) << std::hex << pc << " " << name;
        EXPECT_EQ(s->name, name) << std::hex << pc;
      }
      ++labels;
    }
    EXPECT_GT(labels, 0u);
    EXPECT_EQ((*elf)->plt_symbol_for(0), nullptr);
  }
  EXPECT_GT(without_symbol, 10u); // libc's
}

TEST(ElfFile, CompressedDebugFrameMatchesUncompressed) {
  std::string dir = ::testing::TempDir();
  std::string plain = dir + "/ehelf_plain", packed = dir + "/ehelf_packed";
  std::string src = std::string(EHELF_SOURCE_DIR) + "/tests/fixtures/recursion.c";
  ASSERT_EQ(std::system(("cc -O2 -g -fno-asynchronous-unwind-tables " + src + " -o " + plain +
                         " && objcopy --compress-debug-sections=zlib " + plain + " " + packed)
                            .c_str()),
            0);
  auto a = ElfFile::open(plain), b = ElfFile::open(packed);
  ASSERT_TRUE(a && b);
  const Section* sa = (*a)->find_section(".debug_frame");
  const Section* sb = (*b)->find_section(".debug_frame");
  ASSERT_TRUE(sa && sb);
  EXPECT_FALSE(sa->compressed());
  EXPECT_TRUE(sb->compressed());
  auto da = (*a)->section_data(*sa), db = (*b)->section_data(*sb);
  ASSERT_TRUE(da && db) << (db ? "" : db.error().to_string());
  EXPECT_TRUE(std::equal(da->begin(), da->end(), db->begin(), db->end()));
  ::unlink(plain.c_str());
  ::unlink(packed.c_str());
}

TEST(ElfFile, MalformedFilesGiveErrorsNotCrashes) {
  auto bytes = test::read_file(test::libc_path());
  ASSERT_GT(bytes.size(), 4096u);
  // Not ELF.
  std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  auto r = ElfFile::parse(text, "text");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().to_string().find("not an ELF file"), std::string::npos);
  // 32-bit.
  std::vector<uint8_t> elf32(bytes.begin(), bytes.begin() + 64);
  elf32[4] = 1;
  r = ElfFile::parse(elf32, "elf32");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().to_string().find("32-bit"), std::string::npos);
  // Every truncation of the first pages, and the section header table cut off.
  for (size_t cut = 0; cut < 4096; cut += 7) {
    std::span<const uint8_t> part(bytes.data(), cut);
    auto e = ElfFile::parse(part, "cut");
    if (e) {
      auto m = load_module_cfi(std::move(*e), LoadOptions{true, true, false});
      if (m) (void)build_unwind_table(*m);
    }
  }
  // Section header offsets pointing anywhere.
  std::vector<uint8_t> copy = bytes;
  uint64_t huge = 0xfffffffffff0;
  std::memcpy(copy.data() + 0x28, &huge, 8); // e_shoff
  r = ElfFile::parse(copy, "bad-shoff");
  EXPECT_FALSE(r);
  // A section whose data lies outside the file.
  copy = bytes;
  auto good = ElfFile::parse(copy, "copy");
  ASSERT_TRUE(good);
  const Section* eh = (*good)->find_section(".eh_frame");
  ASSERT_NE(eh, nullptr);
  uint64_t shoff;
  std::memcpy(&shoff, copy.data() + 0x28, 8);
  uint64_t off_field = shoff + uint64_t(eh->index) * 64 + 0x18;
  std::memcpy(copy.data() + off_field, &huge, 8);
  auto bad = ElfFile::parse(copy, "bad-section");
  ASSERT_TRUE(bad);
  auto m = load_module_cfi(std::move(*bad));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().to_string().find("outside the file"), std::string::npos);
}

} // namespace
} // namespace ehelf
