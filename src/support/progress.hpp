// A one-line progress bar on a terminal (stderr), for commands that take more than a second.
#pragma once

#include <cstddef>
#include <string_view>

namespace ehelf {

// "\r<label>: [#####.....] done/total <unit>"; call it again to update.
void print_progress_bar(std::string_view label, size_t done, size_t total, std::string_view unit);
// Erases the bar's line.
void clear_progress_bar();

} // namespace ehelf
