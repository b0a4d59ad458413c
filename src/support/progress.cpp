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

DelayedProgress::DelayedProgress(std::string_view label, std::string_view unit, bool enabled,
                                 Now now)
    : label_(label), unit_(unit), now_(now), enabled_(enabled), start_(now_()), last_(start_) {}

void DelayedProgress::update(size_t done, size_t total) {
  if (!enabled_) return;
  const Clock::time_point now = now_();
  if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(100))
    return;
  last_ = now;
  shown_ = true;
  print_progress_bar(label_, done, total, unit_);
}

void DelayedProgress::finish() {
  if (shown_) clear_progress_bar();
  shown_ = false;
  enabled_ = false;
}

} // namespace ehelf
