// CLOCK_MONOTONIC in nanoseconds: the clock of ehelf record's perf records (use_clockid) and of
// the in-kernel walk's times (bpf_ktime_get_ns), so that user space can compare its own reads
// with both.
#pragma once

#include <cstdint>
#include <time.h>

namespace ehelf {

inline uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

} // namespace ehelf
