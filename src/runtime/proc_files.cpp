#include "runtime/proc_files.hpp"

#include <cerrno>
#include <charconv>
#include <dirent.h>

#include <fmt/format.h>
#include <optional>

#include "support/read_text_file.hpp"

namespace ehelf {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

// A hexadecimal field ending at `stop` (or the end); advances past the stop character.
bool hex_field(std::string_view& s, char stop, uint64_t& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (ec != std::errc{} || end == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(end - s.data()));
  if (s.empty() || s.front() != stop) return false;
  s.remove_prefix(1);
  return true;
}

// Skips a field and the blanks after it.
void skip_field(std::string_view& s) {
  while (!s.empty() && s.front() != ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
}

} // namespace

bool read_proc_file(const std::string& path, std::string& out) {
  // /proc/PID/maps of a process with a million mappings is ~100 MB: the bound is above that.
  std::optional<std::string> text = read_text_file(path, size_t(1) << 30);
  if (!text) return false;
  out = std::move(*text);
  return true;
}

bool ProcMapping::deleted() const {
  return path.size() > kDeleted.size() && path.ends_with(kDeleted);
}

std::string ProcMapping::open_path(int pid) const {
  return deleted() ? fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, start, end) : path;
}

bool parse_proc_maps_line(std::string_view s, ProcMapping& m) {
  if (!hex_field(s, '-', m.start) || !hex_field(s, ' ', m.end)) return false;
  if (s.size() < 5 || s[4] != ' ') return false;
  m.executable = s[2] == 'x';
  m.writable = s[1] == 'w';
  s.remove_prefix(5);
  if (!hex_field(s, ' ', m.offset)) return false;
  skip_field(s); // device
  skip_field(s); // inode, and the padding before the path
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.remove_suffix(1);
  m.path = std::string(s);
  return m.start < m.end;
}

std::optional<std::vector<ProcMapping>> read_proc_maps(int pid, bool executable_only) {
  std::string text;
  if (!read_proc_file(fmt::format("/proc/{}/maps", pid), text)) return std::nullopt;
  std::vector<ProcMapping> out;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    ProcMapping m;
    if (parse_proc_maps_line(rest.substr(0, nl), m) && (m.executable || !executable_only))
      out.push_back(std::move(m));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
  return out;
}

std::optional<std::vector<int>> proc_numeric_entries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return std::nullopt;
  std::vector<int> out;
  while (dirent* e = ::readdir(d)) {
    int n = 0;
    const char* end = e->d_name + std::char_traits<char>::length(e->d_name);
    auto [p, ec] = std::from_chars(e->d_name, end, n);
    if (ec == std::errc{} && p == end && n > 0) out.push_back(n);
  }
  ::closedir(d);
  return out;
}

namespace {

// The fields of /proc/PID/stat after "pid (comm) ": from the state on ("" if unreadable). They
// follow the last ')', since a comm may hold parentheses.
std::string stat_fields_of(const std::string& path) {
  std::string stat;
  if (!read_proc_file(path, stat)) return {};
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return {};
  return stat.substr(close + 2);
}

std::string stat_fields(int pid) {
  return stat_fields_of("/proc/" + std::to_string(pid) + "/stat");
}

} // namespace

int proc_parent(int pid) {
  const std::string fields = stat_fields(pid); // "S ppid ..."
  int ppid = 0;
  if (fields.size() > 2) std::from_chars(fields.data() + 2, fields.data() + fields.size(), ppid);
  return ppid;
}

char proc_state(int pid) {
  const std::string fields = stat_fields(pid);
  return fields.empty() ? 0 : fields[0];
}

std::optional<ProcAddressSpace> proc_address_space(int pid) {
  // After "pid (comm) ": state is field 3 of proc(5), startcode 26, startstack 28.
  const std::string fields = stat_fields(pid);
  std::string_view rest = fields;
  uint64_t values[26] = {};
  for (size_t i = 0; i < 26; ++i) {
    while (!rest.empty() && rest.front() == ' ')
      rest.remove_prefix(1);
    if (rest.empty()) return std::nullopt;
    if (i > 0) { // (the state is a letter)
      auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), values[i]);
      if (ec != std::errc{} && ec != std::errc::result_out_of_range) values[i] = 0;
      rest.remove_prefix(size_t(end - rest.data()));
    }
    while (!rest.empty() && rest.front() != ' ')
      rest.remove_prefix(1);
  }
  ProcAddressSpace space{values[26 - 3], values[28 - 3]};
  if (space.start_code == 1 && space.start_stack == 0) return std::nullopt; // not permitted
  return space;
}

bool proc_runs(int pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task/";
  for (int tid : proc_numeric_entries(task).value_or(std::vector<int>{})) {
    const std::string fields = stat_fields_of(task + std::to_string(tid) + "/stat");
    if (!fields.empty() && fields[0] == 'R') return true;
  }
  return false;
}

} // namespace ehelf
