#include "eh/counters.hpp"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace ehelf::eh {

bool g_counting = false;
constinit Counters g_counters;

namespace {

void print_counters() {
  char line[256];
  const int n =
      std::snprintf(line, sizeof line,
                    "ehelf-eh: %llu raise, %llu resume, %llu forced, %llu backtrace, %llu landing, "
                    "%llu foreign, %llu handed to libgcc\n",
                    static_cast<unsigned long long>(g_counters.raises.load()),
                    static_cast<unsigned long long>(g_counters.resumes.load()),
                    static_cast<unsigned long long>(g_counters.forced.load()),
                    static_cast<unsigned long long>(g_counters.backtraces.load()),
                    static_cast<unsigned long long>(g_counters.landings.load()),
                    static_cast<unsigned long long>(g_counters.foreign.load()),
                    static_cast<unsigned long long>(g_counters.handed.load()));
  if (n > 0) (void)!::write(STDERR_FILENO, line, static_cast<size_t>(n));
}

__attribute__((constructor)) void read_environment() {
  if (std::getenv("EHELF_EH_STATS")) {
    g_counting = true;
    std::atexit(print_counters);
  }
}

} // namespace

} // namespace ehelf::eh
