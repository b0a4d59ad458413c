// Trust and containment (docs/security.md): names from outside reach generated C only escaped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <signal.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include "compile/codegen.hpp"
#include "compile/compile_module.hpp"
#include "dwarf/module_cfi.hpp"
#include "eh_elf/eh_elf_check.hpp"
#include "elf/elf_file.hpp"
#include "elf/mapped_file.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

// Undoes comment_safe's \xNN escapes (the oracle: the comment shows exactly the input's bytes).
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x') {
      out += static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

TEST(CommentSafe, HostileNamesCannotCloseSpliceOrBreakTheComment) {
  const std::vector<std::string> names = {
      "a*/int ehelf_pwned_var = 42;/*x.so",
      "*/__attribute__((constructor)) static void f(void){}/*",
      "x\nint y;\n",
      "q?\?/\nint z;",
      "back\\",
      "quote\"'",
      std::string("nul\0inside", 10),
      "\xff\xfe\x80",
      "%s{}{0}",
      "/usr/lib/x86_64-linux-gnu/libz.so.1",
  };
  for (const std::string& name : names) {
    std::string safe = comment_safe(name);
    for (char ch : safe)
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("._/-\\", ch))
          << "byte " << int(ch) << " kept from " << name;
    EXPECT_EQ(safe.find("*/"), std::string::npos) << safe;
    EXPECT_EQ(safe.find("??"), std::string::npos) << safe;
    // A backslash is always followed by 'x', so it never splices a line.
    for (size_t i = 0; i < safe.size(); ++i) {
      if (safe[i] == '\\') {
        EXPECT_EQ(safe[i + 1], 'x') << safe;
      }
    }
    EXPECT_EQ(unescape(safe), name) << safe;
  }
  EXPECT_EQ(comment_safe("/usr/lib/libz.so.1"), "/usr/lib/libz.so.1");
  EXPECT_EQ(comment_safe("a b"), "a\\x20b");
}

TEST(CommentSafe, LongNamesAreCut) {
  std::string name(4096, '*');
  std::string safe = comment_safe(name);
  EXPECT_EQ(safe.size(), 256 * 4 + 3);
  EXPECT_EQ(safe.substr(safe.size() - 3), "...");
  EXPECT_EQ(safe.find("*/"), std::string::npos);
}

// The check accepts what ehelf's compiler makes with every supported C compiler and flag set (the
// --verify load goes through it), and refuses the same bytes cut short.
TEST(EhElfCheck, AcceptsWhatTheCompilerMakes) {
  std::string dir = ::testing::TempDir();
  std::vector<std::pair<std::string, std::string>> variants = {
      {"cc", "-O1"}, {"cc", "-O0"}, {"cc", "-O3"}};
  if (!test::run_command("command -v clang").empty()) variants.push_back({"clang", "-O1"});
  for (const auto& [cc, opt] : variants) {
    for (RegisterSet set : {RegisterSet::Minimal, RegisterSet::CalleeSaved}) {
      CompileOptions co;
      co.registers = set;
      co.toolchain.compiler = cc;
      co.toolchain.optimization = opt;
      co.verify = true;
      std::string out = dir + "/check-" + cc + opt + ".so";
      auto r = compile_module("/usr/lib/x86_64-linux-gnu/libz.so.1", out, co);
      ASSERT_TRUE(r) << cc << " " << opt << ": " << r.error().to_string();
      ASSERT_TRUE(r->verification) << cc << " " << opt;
      auto bytes = test::read_file(out);
      std::remove(out.c_str());
      EXPECT_TRUE(check_eh_elf_image(bytes)) << cc << " " << opt;
      for (size_t keep : {size_t(0), size_t(63), bytes.size() / 2, bytes.size() - 1})
        EXPECT_FALSE(check_eh_elf_image(std::span<const uint8_t>(bytes.data(), keep)))
            << cc << " " << opt << " cut to " << keep;
    }
  }
}

// One byte-level change at a time to a genuine object: each makes the check refuse it, for the
// reason the change introduces.
TEST(EhElfCheck, RefusesEachHostileChange) {
  std::string out = ::testing::TempDir() + "/mutate.so";
  auto r = compile_module("/usr/lib/x86_64-linux-gnu/libz.so.1", out);
  ASSERT_TRUE(r) << r.error().to_string();
  const std::vector<uint8_t> good = test::read_file(out);
  std::remove(out.c_str());
  ASSERT_TRUE(check_eh_elf_image(good));
  auto elf = ElfFile::parse(good, "mutate.so");
  ASSERT_TRUE(elf);
  auto file_offset = [&](uint64_t vaddr) -> size_t {
    for (const Segment& g : (*elf)->segments())
      if (g.type == PT_LOAD && vaddr >= g.vaddr && vaddr < g.vaddr + g.filesz)
        return g.offset + (vaddr - g.vaddr);
    ADD_FAILURE() << "no segment holds " << vaddr;
    return 0;
  };
  auto phdr_offset = [&](uint32_t type, uint32_t need_flags) -> size_t {
    Elf64_Ehdr eh;
    std::memcpy(&eh, good.data(), sizeof eh);
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr p;
      std::memcpy(&p, good.data() + eh.e_phoff + i * sizeof p, sizeof p);
      if (p.p_type == type && (p.p_flags & need_flags) == need_flags)
        return eh.e_phoff + i * sizeof p;
    }
    ADD_FAILURE() << "no program header of type " << type;
    return 0;
  };
  std::map<int64_t, std::pair<size_t, uint64_t>> dyn; // tag -> (file offset of entry, value)
  size_t dyn_at =
      std::find_if((*elf)->segments().begin(), (*elf)->segments().end(), [](const Segment& g) {
        return g.type == PT_DYNAMIC;
      })->offset;
  for (size_t at = dyn_at;; at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    std::memcpy(&d, good.data() + at, sizeof d);
    if (d.d_tag == DT_NULL) break;
    dyn[d.d_tag] = {at, d.d_un.d_val};
  }
  ASSERT_TRUE(dyn.count(DT_RELACOUNT) && dyn.count(DT_RELA) && dyn.count(DT_SYMTAB));
  size_t rela = file_offset(dyn[DT_RELA].second);
  size_t sym1 = file_offset(dyn[DT_SYMTAB].second) + sizeof(Elf64_Sym);
  Elf64_Sym first_symbol;
  std::memcpy(&first_symbol, good.data() + sym1, sizeof first_symbol);
  size_t name1 = file_offset(dyn[DT_STRTAB].second) + first_symbol.st_name;

  struct Mutation {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> apply;
    const char* reason;
  };
  auto put = [](std::vector<uint8_t>& b, size_t at, auto v) { std::memcpy(&b[at], &v, sizeof v); };
  auto or_flags = [&](size_t phdr, uint32_t f) {
    return [=](std::vector<uint8_t>& b) {
      Elf64_Phdr p;
      std::memcpy(&p, &b[phdr], sizeof p);
      p.p_flags |= f;
      put(b, phdr, p);
    };
  };
  auto retag = [&](int64_t from, int64_t to) {
    return [&, from, to](std::vector<uint8_t>& b) { put(b, dyn[from].first, to); };
  };
  const std::vector<Mutation> mutations = {
      {"executable stack", or_flags(phdr_offset(PT_GNU_STACK, 0), PF_X), "executable stack"},
      {"writable code", or_flags(phdr_offset(PT_LOAD, PF_X), PF_W), "writable and executable"},
      {"PT_NOTE becomes PT_INTERP",
       [&](std::vector<uint8_t>& b) { put(b, phdr_offset(PT_NOTE, 0), uint32_t(PT_INTERP)); },
       "program header type 0x3"},
      {"DT_NEEDED", retag(DT_RELACOUNT, DT_NEEDED), "dynamic tag DT_NEEDED"},
      {"DT_INIT", retag(DT_RELACOUNT, DT_INIT), "dynamic tag DT_INIT"},
      {"DT_TEXTREL", retag(DT_RELACOUNT, DT_TEXTREL), "dynamic tag DT_TEXTREL"},
      {"DT_RPATH", retag(DT_RELACOUNT, DT_RPATH), "dynamic tag DT_RPATH"},
      {"a symbol relocation",
       [&](std::vector<uint8_t>& b) { put(b, rela + 8, uint64_t(ELF64_R_INFO(1, R_X86_64_64))); },
       "relocation type 1 against symbol 1"},
      {"a relocation into code",
       [&](std::vector<uint8_t>& b) { put(b, rela, uint64_t(first_symbol.st_value)); },
       "outside the writable segments"},
      {"a weak symbol",
       [&](std::vector<uint8_t>& b) {
         b[sym1 + offsetof(Elf64_Sym, st_info)] =
             ELF64_ST_INFO(STB_WEAK, ELF64_ST_TYPE(first_symbol.st_info));
       },
       "is not defined as ehelf defines it"},
      {"a symbol named malloc",
       [&](std::vector<uint8_t>& b) { std::memcpy(&b[name1], "malloc", 7); },
       "exports symbol malloc"},
      {"an executable",
       [&](std::vector<uint8_t>& b) { put(b, offsetof(Elf64_Ehdr, e_type), uint16_t(ET_EXEC)); },
       "not an x86_64 ELF64 shared object"},
  };
  for (const Mutation& m : mutations) {
    std::vector<uint8_t> bad = good;
    m.apply(bad);
    auto st = check_eh_elf_image(bad);
    ASSERT_FALSE(st) << m.what << " was accepted";
    EXPECT_NE(st.error().message.find(m.reason), std::string::npos)
        << m.what << ": " << st.error().message;
  }
}

// Each bound on what one input can generate stops generation with kTooLargeToCompile; libz's
// table is well within the defaults.
TEST(CodegenBounds, OverABoundIsTooLargeToCompile) {
  auto module = load_module_cfi("/usr/lib/x86_64-linux-gnu/libz.so.1");
  ASSERT_TRUE(module) << module.error().to_string();
  auto table = build_unwind_table(*module);
  ASSERT_TRUE(table) << table.error().to_string();
  CodegenStats stats;
  auto full = generate_eh_elf_source(*table, CodegenOptions{}, &stats);
  ASSERT_TRUE(full) << full.error().to_string();
  ASSERT_GT(stats.bodies, 10u);
  CodegenOptions few_bodies;
  few_bodies.max_bodies = stats.bodies - 1;
  auto r = generate_eh_elf_source(*table, few_bodies);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, fmt::format("too large to compile: more than {} distinct row "
                                           "bodies; the table backend unwinds it",
                                           stats.bodies - 1));
  for (LookupKind lookup : {LookupKind::Table, LookupKind::Tree}) {
    CodegenOptions small;
    small.lookup = lookup;
    small.max_source_bytes = full->size() / 2;
    r = generate_eh_elf_source(*table, small);
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().message.starts_with(kTooLargeToCompile)) << r.error().message;
  }
  // Exactly at the size generated: accepted (the final check counts the real bytes).
  CodegenOptions exact;
  exact.max_source_bytes = full->size();
  exact.max_bodies = stats.bodies;
  EXPECT_TRUE(generate_eh_elf_source(*table, exact));
}

// zlib stream of `size` zero bytes, compressed 1 MiB at a time.
std::vector<uint8_t> deflate_zeros(uint64_t size) {
  std::vector<uint8_t> in(1 << 20), out(size / 512 + 4096);
  z_stream z{};
  deflateInit(&z, 9);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  for (uint64_t left = size; left > 0 || z.avail_in;) {
    if (!z.avail_in) {
      uint64_t n = std::min<uint64_t>(left, in.size());
      z.next_in = in.data();
      z.avail_in = static_cast<uInt>(n);
      left -= n;
    }
    deflate(&z, left ? Z_NO_FLUSH : Z_FINISH);
    if (!left && !z.avail_in) break;
  }
  while (deflate(&z, Z_FINISH) == Z_OK) {
  }
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// An ELF64 relocatable file whose sections .z1 ... .zN each hold `size` zero bytes, compressed.
std::vector<uint8_t> elf_with_compressed_sections(int n, uint64_t size) {
  std::vector<uint8_t> payload = deflate_zeros(size);
  Elf64_Chdr ch{ELFCOMPRESS_ZLIB, 0, size, 1};
  std::vector<uint8_t> f(sizeof(Elf64_Ehdr));
  std::vector<Elf64_Shdr> sh(1);
  std::string names(1, '\0');
  for (int i = 1; i <= n; ++i) {
    Elf64_Shdr s{};
    s.sh_name = static_cast<uint32_t>(names.size());
    names += ".z" + std::to_string(i) + '\0';
    s.sh_type = SHT_PROGBITS;
    s.sh_flags = SHF_COMPRESSED;
    s.sh_offset = f.size();
    s.sh_size = sizeof ch + payload.size();
    s.sh_addralign = 1;
    f.insert(f.end(), reinterpret_cast<uint8_t*>(&ch), reinterpret_cast<uint8_t*>(&ch + 1));
    f.insert(f.end(), payload.begin(), payload.end());
    sh.push_back(s);
  }
  Elf64_Shdr strtab{};
  strtab.sh_name = static_cast<uint32_t>(names.size());
  names += std::string(".shstrtab") + '\0';
  strtab.sh_type = SHT_STRTAB;
  strtab.sh_offset = f.size();
  strtab.sh_size = names.size();
  f.insert(f.end(), names.begin(), names.end());
  sh.push_back(strtab);
  while (f.size() % 8)
    f.push_back(0);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_REL;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof eh;
  eh.e_shoff = f.size();
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<uint16_t>(sh.size());
  eh.e_shstrndx = static_cast<uint16_t>(sh.size() - 1);
  std::memcpy(f.data(), &eh, sizeof eh);
  for (const Elf64_Shdr& s : sh)
    f.insert(f.end(), reinterpret_cast<const uint8_t*>(&s),
             reinterpret_cast<const uint8_t*>(&s + 1));
  return f;
}

// A 300 KB file with three sections of 96 MiB each: two decompress, the third would pass the
// per-file limit (256 MiB) and is refused with an error naming the section (callers add the
// file's name, as for every section error).
TEST(DecompressionLimit, CapsBytesPerFileNotOnlyPerSection) {
  constexpr uint64_t kSection = uint64_t(96) << 20;
  auto bytes = elf_with_compressed_sections(3, kSection);
  EXPECT_LT(bytes.size(), 400u << 10);
  auto elf = ElfFile::parse(bytes, "bomb.o");
  ASSERT_TRUE(elf) << elf.error().to_string();
  for (int i = 1; i <= 3; ++i) {
    const Section* s = (*elf)->find_section(".z" + std::to_string(i));
    ASSERT_NE(s, nullptr);
    auto data = (*elf)->section_data(*s);
    if (i < 3) {
      ASSERT_TRUE(data) << data.error().to_string();
      EXPECT_EQ(data->size(), kSection);
      EXPECT_EQ(std::count(data->begin(), data->end(), 0), static_cast<long>(kSection));
    } else {
      ASSERT_FALSE(data);
      std::string e = data.error().to_string();
      EXPECT_NE(e.find(".z3"), std::string::npos) << e;
      EXPECT_NE(e.find("limit of 256 MiB per file"), std::string::npos) << e;
    }
  }
}

std::string copy_of_libc(const std::string& name) {
  std::string path = ::testing::TempDir() + "/" + name;
  test::write_file(path, test::read_file(test::libc_path()));
  return path;
}

// A file truncated while mapped: reads of the lost pages give zeros instead of SIGBUS, and the
// mapping says so with an error naming the file.
TEST(MappedFileGuard, TruncatedWhileMappedReadsZerosAndSaysSo) {
  std::string path = copy_of_libc("truncated-libc.so");
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f) << f.error().to_string();
  auto bytes = (*f)->bytes();
  ASSERT_GT(bytes.size(), 1u << 20);
  EXPECT_TRUE((*f)->check_intact());
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  uint64_t nonzero_past_end = 0;
  for (size_t i = 4096; i < bytes.size(); i += 1024)
    nonzero_past_end += static_cast<volatile const uint8_t&>(bytes[i]) != 0;
  EXPECT_EQ(nonzero_past_end, 0u);
  EXPECT_EQ(bytes[0], 0x7f); // the page that is still in the file
  EXPECT_TRUE((*f)->truncated());
  auto st = (*f)->check_intact();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().to_string(),
            path + ": the file was truncated while being read (it changed on disk)");
  ::unlink(path.c_str());
}

// Resident kB of the mapping that starts at `start`, from /proc/self/smaps.
long resident_kb(const void* start) {
  const std::string key = fmt::format("{:x}-", reinterpret_cast<uintptr_t>(start));
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  bool in = false;
  long kb = -1;
  while (std::fgets(line, sizeof line, f)) {
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && std::strchr(line, '-'))
      in = std::string(line).rfind(key, 0) == 0;
    else if (in && std::sscanf(line, "Rss: %ld kB", &kb) == 1)
      break;
  }
  std::fclose(f);
  return kb;
}

// Released pages leave resident memory and read back the same bytes (from the page cache).
TEST(MappedFileGuard, ReleasedPagesLeaveResidentMemoryAndReadBackTheSame) {
  std::string path = copy_of_libc("released-libc.so");
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f) << f.error().to_string();
  auto bytes = (*f)->bytes();
  std::vector<uint8_t> before(bytes.begin(), bytes.end()); // touches every page
  const long touched = resident_kb(bytes.data());
  ASSERT_GT(touched, static_cast<long>(bytes.size() / 1024 / 2));
  (*f)->release_pages(0, bytes.size());
  EXPECT_LT(resident_kb(bytes.data()), touched / 8);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), bytes.begin()));
  // Part of a range: only its whole pages go; the bytes are still the file's.
  (*f)->release_pages(100, 3 * 4096);
  (*f)->release_pages(bytes.size() - 10, 1000); // past the end: clipped
  EXPECT_TRUE(std::equal(before.begin(), before.end(), bytes.begin()));
  EXPECT_TRUE((*f)->check_intact());
  ::unlink(path.c_str());
}

// A SIGBUS elsewhere (a mapping the guard does not know) still ends the process: the guard
// passes it on to the previous handler or the default action.
TEST(MappedFileGuard, OtherFaultsStillEndTheProcess) {
  std::string path = copy_of_libc("other-libc.so");
  ASSERT_TRUE(MappedFile::open(path)); // installs the guard
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::open(path.c_str(), O_RDONLY);
    auto* p = static_cast<volatile const uint8_t*>(
        ::mmap(nullptr, 1 << 20, PROT_READ, MAP_PRIVATE, fd, 0));
    if (::truncate(path.c_str(), 0) != 0) ::_exit(2);
    uint8_t v = p[1 << 19];
    ::_exit(v == 0 ? 0 : 3); // reached only if the fault was swallowed
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  // SIGBUS by default; under ASan its handler reports the fault and exits non-zero, or aborts
  // (ASAN_OPTIONS=abort_on_error=1, as CI runs it).
  EXPECT_TRUE(
      (WIFSIGNALED(status) && (WTERMSIG(status) == SIGBUS || WTERMSIG(status) == SIGABRT)) ||
      (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2 &&
       WEXITSTATUS(status) != 3))
      << "status " << status;
  ::unlink(path.c_str());
}

} // namespace
} // namespace ehelf
