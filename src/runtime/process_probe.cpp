#include "runtime/process_probe.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/memory.hpp"

namespace ehelf {
namespace {

bool is_number(const char* s) {
  if (!*s) return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

// True if a thread of process `pid` is traced by a thread of this process.
bool traced_by_us(const std::string& pid) {
  const std::string dir = "/proc/" + pid + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = ::readdir(d)) {
    if (!is_number(e->d_name)) continue;
    std::string status;
    if (!read_proc_file(dir + "/" + e->d_name + "/status", status)) continue;
    const size_t at = status.find("TracerPid:");
    if (at == std::string::npos) continue;
    const long tracer = std::strtol(status.c_str() + at + 10, nullptr, 10);
    if (tracer <= 0) continue;
    if (::access(("/proc/self/task/" + std::to_string(tracer)).c_str(), F_OK) == 0) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

} // namespace

bool read_proc_file(const std::string& path, std::string& out) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  out.clear();
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  std::fclose(f);
  return true;
}

pid_t find_traced_process(const uint64_t (&addrs)[2], const uint64_t (&expected)[2]) {
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  pid_t match = 0;
  int matches = 0;
  while (dirent* e = ::readdir(d)) {
    if (!is_number(e->d_name) || !traced_by_us(e->d_name)) continue;
    const auto candidate = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
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
  ::closedir(d);
  return matches == 1 ? match : 0;
}

} // namespace ehelf
