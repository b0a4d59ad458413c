#include "perf/perf_map.hpp"

#include <algorithm>
#include <charconv>
#include <fcntl.h>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

#include "support/read_text_file.hpp"

namespace ehelf::perf {
namespace {

constexpr uint64_t kMaxBytes = uint64_t(256) << 20;

bool parse_hex(std::string_view& s, uint64_t& out) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (ec != std::errc{} || end == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(end - s.data()));
  return true;
}

} // namespace

PerfMap PerfMap::parse(std::string_view text) {
  // Later definitions replace what they overlap: built in an interval map, then flattened.
  std::map<uint64_t, Entry> by_start;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    uint64_t start = 0, size = 0;
    if (!parse_hex(line, start) || line.empty() || line[0] != ' ') continue;
    line.remove_prefix(1);
    if (!parse_hex(line, size) || line.empty() || line[0] != ' ' || size == 0) continue;
    line.remove_prefix(1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.remove_suffix(1);
    if (line.empty() || start + size < start) continue;
    const uint64_t end = start + size;
    // Cut what the new entry overlaps.
    auto it = by_start.lower_bound(start);
    if (it != by_start.begin() && std::prev(it)->second.end > start) --it;
    std::vector<Entry> kept;
    while (it != by_start.end() && it->second.start < end) {
      Entry& e = it->second;
      if (e.start < start) kept.push_back({e.start, start, e.name});
      if (e.end > end) kept.push_back({end, e.end, e.name});
      it = by_start.erase(it);
    }
    for (Entry& e : kept)
      by_start.emplace(e.start, std::move(e));
    by_start.emplace(start, Entry{start, end, std::string(line)});
  }
  PerfMap map;
  map.entries_.reserve(by_start.size());
  for (auto& [start, e] : by_start)
    map.entries_.push_back(std::move(e));
  return map;
}

PerfMap PerfMap::load(uint32_t pid) {
  // Owned by us or root: a perf map is trusted to name code (a map another user could write
  // would let them name our frames).
  const std::optional<std::string> text =
      read_text_file(path_for(pid), kMaxBytes, O_NOFOLLOW, [](const struct stat& st) {
        return st.st_uid == ::geteuid() || st.st_uid == 0;
      });
  return text ? parse(*text) : PerfMap{};
}

const PerfMap::Entry* PerfMap::find(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

} // namespace ehelf::perf
