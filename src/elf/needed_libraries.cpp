#include "elf/needed_libraries.hpp"

#include <elf.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <set>

#include "support/read_text_file.hpp"

namespace ehelf {
namespace {

// A NUL-terminated string at `offset` of `strings`; empty when it is outside or unterminated.
std::string_view string_at(std::span<const uint8_t> strings, uint64_t offset) {
  if (offset >= strings.size()) return {};
  const auto* start = reinterpret_cast<const char*>(strings.data()) + offset;
  const void* nul = std::memchr(start, 0, strings.size() - offset);
  return nul ? std::string_view(start, size_t(static_cast<const char*>(nul) - start))
             : std::string_view();
}

std::vector<std::string> split_paths(std::string_view list, std::string_view origin) {
  std::vector<std::string> dirs;
  while (!list.empty()) {
    const size_t colon = list.find(':');
    std::string dir(list.substr(0, colon));
    list = colon == std::string_view::npos ? std::string_view() : list.substr(colon + 1);
    for (std::string_view token : {"${ORIGIN}", "$ORIGIN"})
      for (size_t at; (at = dir.find(token)) != std::string::npos;)
        dir.replace(at, token.size(), origin);
    if (!dir.empty()) dirs.push_back(std::move(dir));
  }
  return dirs;
}

// The directories of an ld.so.conf file and of the files it includes (glob patterns), in order.
void read_ld_so_conf(const std::string& path, int depth, std::vector<std::string>& dirs) {
  if (depth > 4) return; // includes that include each other
  auto text = read_text_file(path, size_t(1) << 20);
  if (!text) return;
  std::string_view rest = *text;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    line = line.substr(0, line.find('#'));
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
      line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
      line.remove_suffix(1);
    if (line.starts_with("include") && line.size() > 7 && (line[7] == ' ' || line[7] == '\t')) {
      std::string pattern(line.substr(8));
      while (!pattern.empty() && (pattern.front() == ' ' || pattern.front() == '\t'))
        pattern.erase(0, 1);
      if (!pattern.empty() && pattern[0] != '/') // relative to the including file's directory
        pattern = path.substr(0, path.rfind('/') + 1) + pattern;
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i)
          read_ld_so_conf(g.gl_pathv[i], depth + 1, dirs);
      ::globfree(&g);
    } else if (!line.empty() && line[0] == '/') {
      dirs.emplace_back(line);
    }
  }
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

DynamicNeeds dynamic_needs(const ElfFile& elf) {
  DynamicNeeds needs;
  if (const Section* interp = elf.find_section(".interp"))
    if (auto data = elf.section_data(*interp)) needs.interpreter = string_at(*data, 0);
  const Section* dynamic = nullptr;
  for (const Section& s : elf.sections())
    if (s.type == SHT_DYNAMIC) dynamic = &s;
  if (!dynamic || dynamic->link >= elf.sections().size()) return needs;
  auto entries = elf.section_data(*dynamic);
  auto strings = elf.section_data(elf.sections()[dynamic->link]);
  if (!entries || !strings) return needs;
  for (size_t at = 0; at + sizeof(Elf64_Dyn) <= entries->size(); at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    std::memcpy(&d, entries->data() + at, sizeof(d));
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_NEEDED && needs.needed.size() < kMaxNeeded) {
      if (std::string_view name = string_at(*strings, d.d_un.d_val); !name.empty())
        needs.needed.push_back(name);
    } else if (d.d_tag == DT_RUNPATH) {
      needs.runpath = string_at(*strings, d.d_un.d_val);
    } else if (d.d_tag == DT_RPATH) {
      needs.rpath = string_at(*strings, d.d_un.d_val);
    }
  }
  return needs;
}

std::vector<std::string> needed_libraries(const std::string& program, size_t max) {
  std::vector<std::string> system_dirs;
  read_ld_so_conf("/etc/ld.so.conf", 0, system_dirs);
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64",
                        "/usr/lib64", "/lib", "/usr/lib"})
    system_dirs.emplace_back(d);

  std::vector<std::string> found;
  std::set<std::string> seen_names, seen_paths;
  std::deque<std::string> queue{program};
  seen_paths.insert(program);
  while (!queue.empty() && found.size() < max) {
    const std::string path = std::move(queue.front());
    queue.pop_front();
    auto elf = ElfFile::open(path);
    if (!elf) continue;
    const DynamicNeeds needs = dynamic_needs(**elf);
    const std::string origin = path.substr(0, path.rfind('/'));
    auto add = [&](const std::string& library) {
      if (found.size() < max && seen_paths.insert(library).second) {
        found.push_back(library);
        queue.push_back(library);
      }
    };
    if (!needs.interpreter.empty() && is_regular_file(std::string(needs.interpreter)))
      add(std::string(needs.interpreter));
    std::vector<std::string> dirs =
        needs.runpath.empty() ? split_paths(needs.rpath, origin) : std::vector<std::string>{};
    for (std::string& d : split_paths(needs.runpath, origin))
      dirs.push_back(std::move(d));
    dirs.insert(dirs.end(), system_dirs.begin(), system_dirs.end());
    for (std::string_view name : needs.needed) {
      if (name.find('/') != std::string_view::npos) { // a path: used as it is
        if (is_regular_file(std::string(name))) add(std::string(name));
        continue;
      }
      if (!seen_names.insert(std::string(name)).second) continue;
      for (const std::string& dir : dirs) {
        std::string candidate = dir + "/" + std::string(name);
        // The first file that is an x86_64 ELF64 (ElfFile refuses others), as the loader skips
        // libraries of another class in the same directories.
        if (is_regular_file(candidate) && ElfFile::open(candidate)) {
          add(candidate);
          break;
        }
      }
    }
  }
  return found;
}

std::string script_interpreter(const std::string& path,
                               const std::function<std::string(const std::string&)>& find_program) {
  if (!is_regular_file(path)) return {};
  // Its first line only (O_NONBLOCK: a file replaced by a FIFO meanwhile does not block).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};
  char head[256];
  const ssize_t n = ::read(fd, head, sizeof(head));
  ::close(fd);
  if (n < 3 || head[0] != '#' || head[1] != '!') return {};
  std::string_view line(head + 2, size_t(n) - 2);
  line = line.substr(0, line.find('\n'));
  auto word = [&line] {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
      line.remove_prefix(1);
    const size_t end = line.find_first_of(" \t\r");
    std::string_view w = line.substr(0, end);
    line = end == std::string_view::npos ? std::string_view() : line.substr(end);
    return std::string(w);
  };
  std::string interpreter = word();
  if (interpreter.empty()) return {};
  if (interpreter.ends_with("/env")) { // #!/usr/bin/env [-S] NAME
    std::string name = word();
    while (name.starts_with("-"))
      name = word();
    return name.empty() ? std::string() : find_program(name);
  }
  return interpreter;
}

} // namespace ehelf
