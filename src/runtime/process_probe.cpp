#include "runtime/process_probe.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "runtime/memory.hpp"
#include "runtime/proc_files.hpp"

namespace ehelf {
namespace {

// True if a thread of process `pid` is traced by a thread of this process.
bool traced_by_us(int pid) {
  for (int tid : proc_threads(pid).value_or(std::vector<int>{})) {
    std::string status;
    if (!read_proc_file(fmt::format("/proc/{}/task/{}/status", pid, tid), status)) continue;
    const size_t at = status.find("TracerPid:");
    if (at == std::string::npos) continue;
    const long tracer = std::strtol(status.c_str() + at + 10, nullptr, 10);
    if (tracer > 0 && ::access(fmt::format("/proc/self/task/{}", tracer).c_str(), F_OK) == 0)
      return true;
  }
  return false;
}

} // namespace

pid_t find_traced_process(const uint64_t (&addrs)[2], const uint64_t (&expected)[2]) {
  pid_t match = 0;
  int matches = 0;
  for (int pid : proc_numeric_entries("/proc").value_or(std::vector<int>{})) {
    if (!traced_by_us(pid)) continue;
    const auto candidate = static_cast<pid_t>(pid);
    ProcessMemory mem(candidate);
    bool same = true;
    for (int i = 0; i < 2 && same; ++i) {
      uint64_t v = 0;
      same = mem.read_u64(addrs[i], v) && v == expected[i];
    }
    if (same) {
      match = candidate;
      ++matches;
    }
  }
  return matches == 1 ? match : 0;
}

} // namespace ehelf
