// PerfMap: the symbol file a JIT compiler writes for perf, /tmp/perf-PID.map (Node --perf-basic-
// prof, the JVM's perf-map-agent, Python 3.12's perf trampolines, LuaJIT...): one line per
// function, "START SIZE NAME" with START and SIZE in hexadecimal (an optional 0x). Frames in
// anonymous executable memory are named from it, as perf names them (module "/tmp/perf-PID.map").
//
// Read as data, with perf's rules: a regular file (not followed through a symbolic link) owned
// by the reader or by root, at most 256 MiB; malformed lines are skipped. Later lines win where
// functions overlap (a JIT reuses memory: the newest code is there now).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ehelf::perf {

class PerfMap {
public:
  struct Entry {
    uint64_t start = 0, end = 0;
    std::string name;
  };
  // /tmp/perf-PID.map, or an empty map when there is none (or it breaks the rules above).
  static PerfMap load(uint32_t pid);
  static PerfMap parse(std::string_view text);

  // The function holding `addr`, or null.
  const Entry* find(uint64_t addr) const;
  bool empty() const { return entries_.empty(); }
  static std::string path_for(uint32_t pid) { return "/tmp/perf-" + std::to_string(pid) + ".map"; }

private:
  std::vector<Entry> entries_; // sorted by start, not overlapping
};

} // namespace ehelf::perf
