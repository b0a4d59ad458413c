// Trust and containment (issue 10): names from outside reach generated C only escaped.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "compile/codegen.hpp"
#include "compile/compile_module.hpp"
#include "compile/eh_elf_check.hpp"
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
      EXPECT_TRUE(check_eh_elf_image(bytes)) << cc << " " << opt;
      for (size_t keep : {size_t(0), size_t(63), bytes.size() / 2, bytes.size() - 1})
        EXPECT_FALSE(check_eh_elf_image(std::span<const uint8_t>(bytes.data(), keep)))
            << cc << " " << opt << " cut to " << keep;
    }
  }
}

} // namespace
} // namespace ehelf
