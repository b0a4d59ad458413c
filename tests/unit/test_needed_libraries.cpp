// needed_libraries against ldd, the loader's own answer, on this test program (libstdc++,
// libgtest, libm, libc... and libasan under ASan) and on libc, whose dynamic section
// readelf -d lists.
#include <gtest/gtest.h>

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include <set>
#include <sstream>
#include <string>

#include "elf/needed_libraries.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

std::string real(const std::string& path) {
  char out[PATH_MAX];
  return ::realpath(path.c_str(), out) ? std::string(out) : path;
}

TEST(NeededLibraries, AsLddFindsThemForThisProgram) {
  const std::string self = real("/proc/self/exe");
  std::set<std::string> ours;
  for (const std::string& path : needed_libraries(self))
    ours.insert(real(path));
  // ldd's lines: "name => /path (0x...)", or "/path (0x...)" for the interpreter; the vDSO
  // has no file.
  std::set<std::string> theirs;
  std::istringstream lines(test::run_command("ldd " + self));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first, arrow, path;
    words >> first >> arrow >> path;
    if (arrow == "=>" && path.starts_with("/"))
      theirs.insert(real(path));
    else if (first.starts_with("/"))
      theirs.insert(real(first));
  }
  ASSERT_GE(theirs.size(), 3u) << "ldd listed too little";
  EXPECT_EQ(ours, theirs);
}

TEST(NeededLibraries, LibcDynamicSectionAsReadelf) {
  auto elf = ElfFile::open(test::libc_path());
  ASSERT_TRUE(elf) << elf.error().to_string();
  const DynamicNeeds needs = dynamic_needs(**elf);
  std::string listed = test::run_command(std::string("readelf -d ") + test::libc_path());
  size_t count = 0;
  for (size_t at = 0; (at = listed.find("(NEEDED)", at)) != std::string::npos; ++at)
    ++count;
  ASSERT_EQ(needs.needed.size(), count);
  for (std::string_view name : needs.needed)
    EXPECT_NE(listed.find("Shared library: [" + std::string(name) + "]"), std::string::npos)
        << name;
  EXPECT_TRUE(needs.runpath.empty());
}

TEST(NeededLibraries, NotAnElfFileNeedsNothing) {
  EXPECT_TRUE(needed_libraries("/etc/hostname").empty());
  EXPECT_TRUE(needed_libraries("/does/not/exist").empty());
}

TEST(NeededLibraries, ScriptInterpreters) {
  char dir[] = "/tmp/ehelf-script-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto script = [&](const std::string& name, const std::string& text) {
    const std::string path = std::string(dir) + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return path;
  };
  auto find = [](const std::string& name) { return "/found/" + name; };
  EXPECT_EQ(script_interpreter(script("a", "#!/bin/sh -e\necho\n"), find), "/bin/sh");
  EXPECT_EQ(script_interpreter(script("b", "#! /usr/bin/env python3\n"), find), "/found/python3");
  EXPECT_EQ(script_interpreter(script("c", "#!/usr/bin/env -S perl -w\n"), find), "/found/perl");
  EXPECT_EQ(script_interpreter(script("d", "#!\n"), find), "");
  EXPECT_EQ(script_interpreter(script("e", "echo\n"), find), "");
  EXPECT_EQ(script_interpreter(test::libc_path(), find), "");
  for (const char* name : {"a", "b", "c", "d", "e"})
    std::remove((std::string(dir) + "/" + name).c_str());
  ::rmdir(dir);
}

} // namespace
} // namespace ehelf
