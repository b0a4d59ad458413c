// Trust and containment (issue 10): names from outside reach generated C only escaped.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "compile/codegen.hpp"

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

} // namespace
} // namespace ehelf
