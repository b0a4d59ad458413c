// Helpers shared by the unit tests: running commands, reading files, locating system files, the
// value of a Result a test goes on with.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support/result.hpp"

namespace ehelf::test {

inline std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  ::pclose(p);
  return out;
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// `text` split at newlines (a command's output, line by line).
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under /tmp, removed with everything in it at the end of the scope.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/ehelf_test_XXXXXX";
    if (const char* made = ::mkdtemp(tmpl)) path = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

inline const char* libc_path() {
  return "/usr/lib/x86_64-linux-gnu/libc.so.6";
}

// The value of a Result that the test goes on with: EHELF_OK(Expression::decode(bytes)). A failed
// Result is the test's failure, naming the expression and its error, and ends the test (by an
// exception, which gtest reports as a failure), where `*result` would be an assert or an
// uncaught std::bad_variant_access.
struct FailedResult : std::runtime_error {
  using std::runtime_error::runtime_error;
};
template <class T> T ok_value(Result<T>&& r, const char* expression, const char* file, int line) {
  if (!r.ok()) {
    const std::string message = std::string(expression) + ": " + r.error().to_string();
    ADD_FAILURE_AT(file, line) << message;
    throw FailedResult(message);
  }
  return std::move(r).value();
}
template <class T> T& ok_value(Result<T>& r, const char* expression, const char* file, int line) {
  if (!r.ok()) {
    const std::string message = std::string(expression) + ": " + r.error().to_string();
    ADD_FAILURE_AT(file, line) << message;
    throw FailedResult(message);
  }
  return r.value();
}
#define EHELF_OK(...) ::ehelf::test::ok_value((__VA_ARGS__), #__VA_ARGS__, __FILE__, __LINE__)

} // namespace ehelf::test
