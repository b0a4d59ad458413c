// A one-line progress bar on a terminal (stderr), for commands that take more than a second.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace ehelf {

// "\r<label>: [#####.....] done/total <unit>"; call it again to update.
void print_progress_bar(std::string_view label, size_t done, size_t total, std::string_view unit);
// Erases the bar's line.
void clear_progress_bar();

// A progress bar for one long loop: drawn only when `enabled` (stderr is a terminal, and the
// output does not go to the same one), only once the work has taken a second (a short run
// prints nothing), redrawn at most ten times a second, erased when done or destroyed. update()
// costs a clock read: call it every few thousand items.
class DelayedProgress {
public:
  using Clock = std::chrono::steady_clock;
  // Where the time comes from: the steady clock, or a test's own.
  using Now = Clock::time_point (*)();
  DelayedProgress(std::string_view label, std::string_view unit, bool enabled,
                  Now now = &Clock::now);
  ~DelayedProgress() { finish(); }
  DelayedProgress(const DelayedProgress&) = delete;
  DelayedProgress& operator=(const DelayedProgress&) = delete;
  void update(size_t done, size_t total);
  void finish(); // erases the bar if it was drawn
  bool shown() const { return shown_; }

private:
  std::string label_, unit_;
  Now now_;
  bool enabled_, shown_ = false;
  Clock::time_point start_, last_;
};

} // namespace ehelf
