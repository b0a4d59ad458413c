// The ar archive reader: members as `ar t` lists them and `ar p` prints them (GNU long names,
// a non-ELF member, the machine's libstdc++.a), and damage at every place in the format said
// at its offset, the members before it kept.
#include <gtest/gtest.h>

#include <algorithm>

#include "elf/archive.hpp"
#include "support/safe_text.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

// Every member of `archive` against ar's listing and bytes.
void expect_as_ar_reads(const std::string& archive) {
  SCOPED_TRACE(archive);
  const std::vector<uint8_t> bytes = test::read_file(archive);
  ASSERT_TRUE(is_archive(bytes));
  const ArchiveListing listing = read_archive(bytes);
  EXPECT_FALSE(listing.damage) << listing.damage->to_string();
  const std::vector<std::string> names = test::lines_of(test::run_command("ar t " + archive));
  ASSERT_EQ(listing.members.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(listing.members[i].name, names[i]);
    // `ar p` prints the first member of that name; names repeat in some libraries.
    if (std::count(names.begin(), names.end(), names[i]) != 1) continue;
    const std::string content = test::run_command("ar p " + archive + " '" + names[i] + "'");
    EXPECT_EQ(std::string(listing.members[i].bytes.begin(), listing.members[i].bytes.end()),
              content)
        << names[i];
  }
}

TEST(Archive, MembersAsArReadsThem) {
  test::TempDir dir;
  const std::string d = dir.path.string();
  test::run_command("cd " + d +
                    " && printf 'int f(){return 1;}' > a.c && gcc -c a.c && cp a.o "
                    "member_name_longer_than_fifteen_bytes.o && printf 'odd' > odd.txt && "
                    "ar rc lib.a a.o odd.txt member_name_longer_than_fifteen_bytes.o a.o");
  expect_as_ar_reads(d + "/lib.a");
  const std::string libstdcxx = test::run_command("gcc -print-file-name=libstdc++.a");
  expect_as_ar_reads(libstdcxx.substr(0, libstdcxx.find('\n')));
  EXPECT_FALSE(is_archive(test::read_file(test::libc_path())));
  test::run_command("cd " + d + " && ar rcT thin.a a.o");
  EXPECT_TRUE(is_thin_archive(test::read_file(d + "/thin.a")));
  EXPECT_FALSE(is_archive(test::read_file(d + "/thin.a")));
}

// A member header (60 bytes) for `name` with `size` bytes of data.
std::string header(std::string name, std::string size, std::string end = "`\n") {
  name.resize(16, ' ');
  size.resize(10, ' ');
  return name + std::string(32, ' ') + size + end;
}

ArchiveListing read(const std::string& text) {
  return read_archive(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

TEST(Archive, DamageIsSaidAtItsOffsetAndEarlierMembersKept) {
  const std::string good = "!<arch>\n" + header("a.o/", "3") + "abc\n"; // padded to even
  ASSERT_EQ(good.size(), 8u + 60 + 4);
  const std::string named =
      good + header("//", "8") + "long.o/\n" + header("/0", "0") + header("#1/5", "7") + "bsd.oXY";
  ArchiveListing ok = read(named); // members point into `named`
  ASSERT_FALSE(ok.damage) << ok.damage->to_string();
  ASSERT_EQ(ok.members.size(), 3u);
  EXPECT_EQ(ok.members[0].name, "a.o");
  EXPECT_EQ(std::string(ok.members[0].bytes.begin(), ok.members[0].bytes.end()), "abc");
  EXPECT_EQ(ok.members[0].offset, 68u);
  EXPECT_EQ(ok.members[1].name, "long.o");
  EXPECT_EQ(ok.members[2].name, "#1"); // BSD's name in the data: readelf's reading
  EXPECT_EQ(std::string(ok.members[2].bytes.begin(), ok.members[2].bytes.end()), "bsd.oXY");

  struct Case {
    std::string tail;
    const char* message;
  };
  const uint64_t at = good.size();
  for (const Case& c : {
           Case{header("b.o/", "3").substr(0, 59), "ends inside a member header (59 of 60"},
           Case{header("b.o/", "3", "xx") + "abc", "no member header here"},
           Case{header("b.o/", "1x") + "a", "member size '1x' is not a number"},
           Case{header("b.o/", "") + "a", "member size '' is not a number"},
           Case{header("b.o/", "-5") + "a", "member size '-5' is not a number"},
           Case{header("b.o/", "5") + "abc",
                "member of 5 bytes runs past the end of the archive (3 left)"},
           Case{header("/7", "0"), "'/7' points outside the long-name table (0 bytes)"},
           Case{header("/x", "0"), "'/x' points outside"},
       }) {
    SCOPED_TRACE(c.message);
    const std::string text = good + c.tail;
    ArchiveListing r = read(text);
    ASSERT_TRUE(r.damage);
    EXPECT_EQ(r.damage->offset, at);
    EXPECT_NE(r.damage->message.find(c.message), std::string::npos) << r.damage->to_string();
    ASSERT_EQ(r.members.size(), 1u);
    EXPECT_EQ(r.members[0].name, "a.o");
  }
  // Names from the file stay on one line in messages: control bytes escaped.
  const std::string escape = good + header("/\x1b[2J", "0");
  ArchiveListing e = read(escape);
  ASSERT_TRUE(e.damage);
  EXPECT_EQ(e.damage->message,
            "member name '/\\x1b[2J' points outside the long-name table (0 bytes)");
  EXPECT_EQ(message_safe("a\x1b[2Jb\n\x7f\xc3\xa9\\"), "a\\x1b[2Jb\\x0a\\x7f\xc3\xa9\\");
  // The magic alone: no members, no damage.
  EXPECT_TRUE(read("!<arch>\n").members.empty());
  EXPECT_FALSE(read("!<arch>\n").damage);
}

} // namespace
} // namespace ehelf
