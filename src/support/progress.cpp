#include "support/progress.hpp"

#include <cstdio>

#include <fmt/format.h>

namespace ehelf {

void print_progress_bar(std::string_view label, size_t done, size_t total, std::string_view unit) {
  constexpr int kWidth = 40;
  const int filled = total ? static_cast<int>(kWidth * done / total) : kWidth;
  fmt::print(stderr, "\r{}: [{:#<{}}{:.<{}}] {}/{} {}", label, "", filled, "", kWidth - filled,
             done, total, unit);
  std::fflush(stderr);
}

void clear_progress_bar() {
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
}

} // namespace ehelf
