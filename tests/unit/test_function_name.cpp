// demangle(name, false) against binutils' `c++filt -p` (libiberty without DMGL_PARAMS, what perf
// prints) on real symbol names: libstdc++'s exported ones and every C++ symbol of the fixture
// cxx_names (lambdas, a local class, templates returning a function pointer, an array reference
// or a template, operators, .cold and .isra clones, function-pointer parameters).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "runtime/symbolize.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

using test::lines_of;
using test::run_command;

bool have(const char* tool) {
  return run_command(std::string("command -v ") + tool + " 2>/dev/null").find(tool) !=
         std::string::npos;
}

// The mangled C++ names (without symbol versions) `nm` finds in `path`'s `table` (-D: .dynsym).
std::vector<std::string> mangled_names(const std::string& path, const std::string& table) {
  std::set<std::string> names;
  for (const std::string& line : lines_of(run_command(
           "nm " + table + " --defined-only --without-symbol-versions '" + path + "' 2>/dev/null")))
    if (size_t space = line.rfind(' '); space != std::string::npos)
      if (line.compare(space + 1, 2, "_Z") == 0) names.insert(line.substr(space + 1));
  return {names.begin(), names.end()};
}

// c++filt -p's name for each of `names`, one call for all.
std::vector<std::string> cxxfilt_names(const std::vector<std::string>& names) {
  test::TempDir dir;
  const std::string list = (dir.path / "names").string();
  std::string text;
  for (const std::string& n : names)
    text += n + "\n";
  test::write_file(list, std::vector<uint8_t>(text.begin(), text.end()));
  return lines_of(run_command("c++filt -p < '" + list + "'"));
}

// c++filt sets DMGL_VERBOSE, perf does not: c++filt spells the standard abbreviations out
// ("std::basic_ostream<char, std::char_traits<char> >" for "std::ostream"), and a '>' it puts
// after one gets a space. Both sides spelled out and without that space compare equal.
std::string spelled_out(std::string s) {
  static const std::vector<std::pair<std::regex, std::string>> abbreviations = {
      {std::regex(R"(std::string(?![\w]))"),
       "std::basic_string<char, std::char_traits<char>, std::allocator<char> >"},
      {std::regex(R"(std::istream(?![\w]))"), "std::basic_istream<char, std::char_traits<char> >"},
      {std::regex(R"(std::ostream(?![\w]))"), "std::basic_ostream<char, std::char_traits<char> >"},
      {std::regex(R"(std::iostream(?![\w]))"),
       "std::basic_iostream<char, std::char_traits<char> >"}};
  for (const auto& [pattern, full] : abbreviations)
    s = std::regex_replace(s, pattern, full);
  return std::regex_replace(s, std::regex("> (?=>)"), ">");
}

struct Comparison {
  size_t compared = 0;
  std::vector<std::string> differences;
  std::map<std::string, std::string> names; // c++filt -p's name by mangled name
};

Comparison compare_with_cxxfilt(const std::vector<std::string>& mangled) {
  Comparison c;
  const std::vector<std::string> theirs = cxxfilt_names(mangled);
  EXPECT_EQ(theirs.size(), mangled.size());
  for (size_t i = 0; i < mangled.size() && i < theirs.size(); ++i) {
    const std::string ours = demangle(mangled[i], false);
    // libstdc++'s __cxa_demangle is older than binutils' and refuses a few new manglings
    // ("_ZGR...E_" reference temporaries): those stay mangled, as before.
    if (ours == mangled[i]) continue;
    ++c.compared;
    c.names[mangled[i]] = theirs[i];
    if (spelled_out(ours) != spelled_out(theirs[i]))
      c.differences.push_back(mangled[i] + "\n  c++filt -p: " + theirs[i] +
                              "\n  ours:       " + ours);
  }
  return c;
}

TEST(FunctionName, FixtureNamesAsCxxfiltWithoutParameters) {
  if (!have("nm") || !have("c++filt")) GTEST_SKIP() << "nm or c++filt (binutils) missing";
  const std::string fixture = std::string(EHELF_FIXTURE_DIR) + "/cxx_names";
  const std::vector<std::string> mangled = mangled_names(fixture, "");
  ASSERT_FALSE(mangled.empty()) << "no C++ symbols in " << fixture;
  const Comparison c = compare_with_cxxfilt(mangled);
  for (const std::string& d : c.differences)
    ADD_FAILURE() << d;
  // The shapes the fixture is there for are all in the table compared.
  std::string all;
  for (const auto& [m, name] : c.names)
    all += name + "\n";
  for (const char* shape :
       {"main::{lambda(long)#1}::operator()\n", "main::{lambda(auto:1)#2}::operator()<int>\n",
        "shapes::Meter::measured(long) const::{lambda(long)#1}::operator()\n",
        "shapes::Meter::measured(long) const::Local::half\n", "shapes::make<long>\n",
        "shapes::pick<long>\n", "shapes::table<long>\n", "shapes::Meter::operator< <long>\n",
        "shapes::Meter::operator()\n", "shapes::Meter::operator->\n",
        "shapes::Meter::operator long\n", "shapes::apply\n", "(anonymous namespace)::hidden\n"})
    EXPECT_NE(all.find(shape), std::string::npos) << "not in the fixture's names: " << shape;
  bool cold = false;
  for (const auto& [m, name] : c.names)
    cold = cold || (m.ends_with(".cold") && name == "shapes::checked_sum");
  EXPECT_TRUE(cold) << "g++ split no .cold part off checked_sum";
}

TEST(FunctionName, LibstdcxxNamesAsCxxfiltWithoutParameters) {
  if (!have("nm") || !have("c++filt")) GTEST_SKIP() << "nm or c++filt (binutils) missing";
  const std::string lib = run_command("g++ -print-file-name=libstdc++.so.6 2>/dev/null");
  const std::string path = lib.empty() ? "" : lib.substr(0, lib.find('\n'));
  const std::vector<std::string> mangled = mangled_names(path, "-D");
  if (mangled.size() < 1000) GTEST_SKIP() << "libstdc++.so.6 not found (g++ -print-file-name)";
  const Comparison c = compare_with_cxxfilt(mangled);
  EXPECT_GT(c.compared, mangled.size() * 99 / 100);
  for (const std::string& d : c.differences)
    ADD_FAILURE() << d;
}

// Shapes the fixture does not emit, mangled by hand, against c++filt -p too.
TEST(FunctionName, HandMangledShapesAsCxxfiltWithoutParameters) {
  if (!have("c++filt")) GTEST_SKIP() << "c++filt (binutils) missing";
  const std::vector<std::string> mangled = {
      "_Z1fIiEPFPFvlEcEv",                 // void (*(*f<int>())(char))(long)
      "_Z1fIiEM1AFvvEv",                   // void (A::*f<int>())()
      "_Z3mdpIiEM1MiT_",                   // int M::* mdp<int>(int)
      "_Z1fIiERA3_iv",                     // int (&f<int>()) [3]
      "_Z1fIiEDTcl1gfp_EET_",              // decltype (g({parm#1})) f<int>(int)
      "_Z1fIiEyv",                         // unsigned long long f<int>()
      "_ZN12_GLOBAL__N_11fIiEEvv",         // void (anonymous namespace)::f<int>()
      "_ZN1AC1IiEET_",                     // A::A<int>(int): no return type
      "_ZN1AcvPFvvEEv",                    // A::operator void (*)()()
      "_ZNKO1A1fEv",                       // A::f() const &&
      "_ZgtIiEbT_S0_",                     // bool operator><int>(int, int)
      "_ZrsIiEbT_S0_",                     // bool operator>><int>(int, int)
      "_ZlsIcERSoS0_T_",                   // std::ostream& operator<< <char>(std::ostream&, char)
      "_ZdaPv",                            // operator delete[](void*)
      "_Zli2_xy",                          // operator"" _x(unsigned long long)
      "_ZZN1A1fEvE1x",                     // A::f()::x (a local static: data)
      "_ZZ3fooIiEvT_ENKUlT_E_clIiEEDaS0_", // auto
                                           // foo<int>(int)::{lambda(auto:1)#1}::operator()<int>
      "_ZThn8_N1B1fEv.cold",               // non-virtual thunk to B::f() [clone .cold]
      "_Z1fv.cold.part.0",                 // f() [clone .cold] [clone .part.0]
      "_ZNKSt17integral_constantIbXltLi1ELi2EEEcvbEv", // a '<' in a template argument
  };
  const Comparison c = compare_with_cxxfilt(mangled);
  EXPECT_EQ(c.compared, mangled.size());
  for (const std::string& d : c.differences)
    ADD_FAILURE() << d;
}

} // namespace
} // namespace ehelf
