// bench_table_build: how long it takes to parse a module's call-frame sections and build its
// UnwindTable, how much memory the table takes, and how that compares with readelf -wF (which
// parses and interprets the same tables) and with `ehelf dump` (which does exactly what readelf
// does); and how long the in-kernel walk's rows of the table take to encode (`ehelf record
// --unwind kernel` builds them for each file a process maps).
//
//   bench_table_build [--json FILE] [--ehelf PATH] [--no-peers] [--max-seconds S] [--min-reps N]
//                     [--max-reps N] [--peer-runs N] [FILE...]
//
// Without files: libc.so.6, libstdc++.so.6 and the largest .so under /usr/lib/x86_64-linux-gnu
// that has an .eh_frame (found at run time). Each file is measured in a forked child so the
// peak-RSS figure of one file is not polluted by another. The page cache is warmed by reading each
// file before anything is timed. Always prints an aligned table to stdout; --json also writes the
// results as JSON.
#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bpf/bpf_rows.hpp"
#include "dwarf/module_cfi.hpp"
#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kLibDir = "/usr/lib/x86_64-linux-gnu";

struct Config {
  std::vector<std::string> files;
  std::string json_path;
  std::string ehelf_path;
  bool peers = true;
  double max_seconds = 10.0; // budget for the timed repetitions of one file
  int min_reps = 5;
  int max_reps = 200;
  int peer_runs = 5;
};

[[noreturn]] void usage(int code) {
  std::fputs(
      "usage: bench_table_build [--json FILE] [--ehelf PATH] [--no-peers] [--max-seconds S]\n"
      "                         [--min-reps N] [--max-reps N] [--peer-runs N] [FILE...]\n"
      "Times load_module_cfi + build_unwind_table per file (median of N >= min-reps runs, at\n"
      "most ~max-seconds each), the table's memory and the peak RSS growth of building it, and\n"
      "readelf -wF / ehelf dump on the same file. Default files: libc.so.6, libstdc++.so.6 and\n"
      "the largest .so with an .eh_frame under /usr/lib/x86_64-linux-gnu.\n",
      code ? stderr : stdout);
  std::exit(code);
}

double to_ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

json timing_json(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  return json{{"median_ms", median(v)},
              {"min_ms", *std::min_element(v.begin(), v.end())},
              {"max_ms", *std::max_element(v.begin(), v.end())},
              {"runs", v.size()}};
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789@%+=:,./-_") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// ---- environment facts ----

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string kernel_release() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return u.release;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon == std::string::npos) break;
      auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "unknown";
}

// First line of a command's output (empty on failure).
std::string first_line_of(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[512];
    if (std::fgets(buf, sizeof buf, p)) out = buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out;
}

// VmHWM and VmRSS from /proc/self/status, in KiB (one read, so they are consistent); -1 if
// unavailable.
struct RssSample {
  long hwm_kib = -1;
  long rss_kib = -1;
};

RssSample read_rss() {
  RssSample s;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0)
      s.hwm_kib = std::strtol(line.c_str() + 6, nullptr, 10);
    else if (line.rfind("VmRSS:", 0) == 0)
      s.rss_kib = std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return s;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return in ? a + " " + b + " " + c : "unknown";
}

// Resets VmHWM to the current RSS (Linux >= 4.0). Returns false if not permitted.
bool reset_peak_rss() {
  int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

// Reads the whole file so the page cache is warm for every contestant.
void warm_page_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::vector<char> buf(1 << 20);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
}

// ---- default inputs ----

// The largest shared object under `dir` (by file size) that has a non-empty .eh_frame.
std::optional<std::string> largest_so_with_eh_frame(const std::string& dir) {
  std::vector<std::pair<uintmax_t, std::string>> candidates;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code e2;
    if (!entry.is_regular_file(e2) || entry.is_symlink(e2)) continue;
    std::string name = entry.path().filename().string();
    auto so = name.find(".so");
    if (so == std::string::npos || (so + 3 != name.size() && name[so + 3] != '.')) continue;
    uintmax_t size = entry.file_size(e2);
    if (e2) continue;
    candidates.emplace_back(size, entry.path().string());
  }
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  for (const auto& [size, path] : candidates) {
    auto elf = ehelf::ElfFile::open(path);
    if (!elf) continue;
    const ehelf::Section* s = (*elf)->find_section(".eh_frame");
    if (s && s->type != SHT_NOBITS && s->size > 0) return path;
  }
  return std::nullopt;
}

// ---- the measured part: runs in a forked child ----

json measure_in_process(const std::string& path, const Config& cfg) {
  json r;
  ehelf::LoadOptions lo; // the full table: .eh_frame, .debug_frame, separate debug file

  // First run: the peak-RSS growth of loading and building, everything kept alive to the end.
  bool reset = reset_peak_rss();
  RssSample before = read_rss();
  auto t0 = Clock::now();
  auto m = ehelf::load_module_cfi(path, lo);
  if (!m) {
    r["error"] = m.error().to_string();
    return r;
  }
  auto t1 = Clock::now();
  ehelf::TableBuildStats stats;
  auto table = ehelf::build_unwind_table(*m, &stats);
  if (!table) {
    r["error"] = table.error().to_string();
    return r;
  }
  auto t2 = Clock::now();
  RssSample after = read_rss();

  const ehelf::ElfFile& elf = *m->elf;
  auto section_size = [](const ehelf::ElfFile& f, const char* name) -> uint64_t {
    const ehelf::Section* s = f.find_section(name);
    return s && s->type != SHT_NOBITS ? s->size : 0;
  };
  r["file_bytes"] = elf.bytes().size();
  r["eh_frame_bytes"] = section_size(elf, ".eh_frame");
  r["eh_frame_hdr_bytes"] = section_size(elf, ".eh_frame_hdr");
  r["debug_frame_bytes"] = m->debug_frame ? m->debug_frame->data.size() : 0;
  r["debug_frame_file"] = m->debug_elf ? json(m->debug_elf->name()) : json(nullptr);
  r["cies"] = (m->eh_frame ? m->eh_frame->cies.size() : 0) +
              (m->debug_frame ? m->debug_frame->cies.size() : 0);
  r["fdes"] = stats.fdes;
  r["empty_fdes"] = stats.empty_fdes;
  r["rows_before_dedup"] = stats.rows;
  r["unique_rows"] = table->row_count();
  r["ranges"] = table->ranges().size();
  r["functions"] = table->function_count();
  r["expressions"] = table->expression_count();
  r["overlaps"] = table->overlaps();
  r["table_bytes"] = table->memory_bytes();
  r["first_run_ms"] = {
      {"parse", to_ms(t1 - t0)}, {"build", to_ms(t2 - t1)}, {"total", to_ms(t2 - t0)}};
  r["rss"] = {{"peak_reset", reset},
              {"hwm_before_kib", before.hwm_kib},
              {"hwm_after_kib", after.hwm_kib},
              {"rss_before_kib", before.rss_kib},
              {"rss_after_kib", after.rss_kib},
              {"peak_growth_kib", before.hwm_kib < 0 || after.hwm_kib < 0
                                      ? json(nullptr)
                                      : json(after.hwm_kib - before.hwm_kib)}};

  // Timed repetitions: at least min_reps, then as many as fit in max_seconds (up to max_reps).
  std::vector<double> parse_ms, build_ms, total_ms, bpf_ms;
  size_t bpf_rows_count = 0;
  double elapsed = 0, last = 0;
  while (static_cast<int>(total_ms.size()) < cfg.min_reps ||
         (static_cast<int>(total_ms.size()) < cfg.max_reps &&
          elapsed + last <= cfg.max_seconds * 1000)) {
    auto a = Clock::now();
    auto mm = ehelf::load_module_cfi(path, lo);
    auto b = Clock::now();
    if (!mm) {
      r["error"] = mm.error().to_string();
      return r;
    }
    auto tt = ehelf::build_unwind_table(*mm);
    auto c = Clock::now();
    if (!tt) {
      r["error"] = tt.error().to_string();
      return r;
    }
    // The in-kernel walk's rows of the same table (what `ehelf record --unwind kernel` builds for
    // each file a process maps, beside the parse and the build above).
    auto bpf_rows = ehelf::encode_bpf_rows(*tt);
    auto d = Clock::now();
    if (bpf_rows) bpf_rows_count = bpf_rows->rows.size();
    parse_ms.push_back(to_ms(b - a));
    build_ms.push_back(to_ms(c - b));
    total_ms.push_back(to_ms(c - a));
    bpf_ms.push_back(to_ms(d - c));
    last = total_ms.back();
    elapsed += last; // destruction is not timed and not counted against the budget
  }
  r["reps"] = total_ms.size();
  r["parse"] = timing_json(parse_ms);
  r["build"] = timing_json(build_ms);
  r["parse_and_build"] = timing_json(total_ms);
  r["bpf_rows"] = timing_json(bpf_ms);
  r["bpf_row_count"] = bpf_rows_count;
  return r;
}

// Forks, measures `path` in the child, returns the child's JSON (or an error object).
json measure_in_child(const std::string& path, const Config& cfg) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return json{{"error", std::string("pipe: ") + strerror(errno)}};
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return json{{"error", std::string("fork: ") + strerror(errno)}};
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    try {
      out = measure_in_process(path, cfg).dump();
    } catch (const std::exception& e) {
      out = json{{"error", std::string("exception: ") + e.what()}}.dump();
    }
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t n = ::write(fds[1], p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(2);
      p += n;
      left -= static_cast<size_t>(n);
    }
    _exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  rusage ru{};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  json r;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    r = json{{"error", fmt::format("child failed (status {:#x})", status)}};
  else
    r = json::parse(text, nullptr, false);
  if (r.is_discarded()) r = json{{"error", "child returned unparsable output"}};
  r["child_maxrss_kib"] = ru.ru_maxrss;
  return r;
}

// ---- peers ----

struct PeerRun {
  double ms = 0;
  int status = 0;
  long maxrss_kib = 0;
};

// Runs argv with stdout and stderr on /dev/null; wall time from spawn to reap.
std::optional<PeerRun> run_quiet(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  auto start = Clock::now();
  int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return std::nullopt;
  int status = 0;
  rusage ru{};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  PeerRun run;
  run.ms = to_ms(Clock::now() - start);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.maxrss_kib = ru.ru_maxrss;
  return run;
}

json measure_peer(const std::vector<std::string>& args, int runs) {
  std::vector<double> ms;
  int status = 0;
  long maxrss = 0;
  for (int i = 0; i < runs; ++i) {
    auto r = run_quiet(args);
    if (!r) return json{{"error", fmt::format("cannot run {}", args[0])}};
    ms.push_back(r->ms);
    status = std::max(status, r->status);
    maxrss = std::max(maxrss, r->maxrss_kib);
  }
  std::string cmd;
  for (const auto& a : args)
    cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
  json j = timing_json(ms);
  j["command"] = cmd + " > /dev/null";
  j["exit_status"] = status;
  j["peak_rss_kib"] = maxrss;
  return j;
}

std::string find_ehelf(const Config& cfg) {
  if (!cfg.ehelf_path.empty()) return cfg.ehelf_path;
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "ehelf"); // build/bin/ next to this benchmark
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path())
      candidates.push_back(dir / "build/bin/ehelf");
  }
  candidates.push_back(fs::current_path(ec) / "build/bin/ehelf");
  for (const auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return c.string();
  return {};
}

// ---- output ----

std::string fmt_num(const json& j, const char* key, double scale = 1, int decimals = 0) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  return fmt::format("{:.{}f}", j[key].get<double>() / scale, decimals);
}

std::string fmt_ms(const json& timing) {
  if (!timing.is_object() || !timing.contains("median_ms")) return "-";
  double v = timing["median_ms"].get<double>();
  return fmt::format("{:.{}f}", v, v < 100 ? 2 : 1);
}

void print_table(const json& report) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"file", ".eh_frame KiB", "FDEs", "rows", "unique rows", "ranges", "exprs",
                  "parse ms", "parse+build ms", "BPF rows ms", "N", "table KiB", "peak RSS KiB",
                  "readelf ms", "ehelf dump ms", "speedup vs readelf", "dump vs readelf"});
  for (const json& f : report["files"]) {
    std::string name = fs::path(f["path"].get<std::string>()).filename().string();
    if (f.contains("error")) {
      rows.push_back({name, "error: " + f["error"].get<std::string>()});
      continue;
    }
    auto ratio = [&](const char* key) {
      return f.contains(key) && f[key].is_number() ? fmt::format("{:.1f}x", f[key].get<double>())
                                                   : std::string("-");
    };
    rows.push_back({name, fmt_num(f, "eh_frame_bytes", 1024, 1), fmt_num(f, "fdes"),
                    fmt_num(f, "rows_before_dedup"), fmt_num(f, "unique_rows"),
                    fmt_num(f, "ranges"), fmt_num(f, "expressions"), fmt_ms(f["parse"]),
                    fmt_ms(f["parse_and_build"]), fmt_ms(f.value("bpf_rows", json())),
                    fmt_num(f, "reps"), fmt_num(f, "table_bytes", 1024, 1),
                    fmt_num(f["rss"], "peak_growth_kib"), fmt_ms(f.value("readelf", json())),
                    fmt_ms(f.value("ehelf_dump", json())), ratio("speedup_vs_readelf"),
                    ratio("dump_speedup_vs_readelf")});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && r.size() == width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      if (r.size() != width.size()) { // error row
        line += (i ? "  " : "") + r[i];
        continue;
      }
      if (i) line += "  ";
      line +=
          i == 0 ? fmt::format("{:<{}}", r[i], width[i]) : fmt::format("{:>{}}", r[i], width[i]);
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    std::puts(line.c_str());
  }
}

} // namespace

int main(int argc, char** argv) {
  Config cfg;
  auto need = [&](int& i) -> std::string {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_table_build: %s needs a value\n", argv[i]);
      usage(2);
    }
    return argv[++i];
  };
  auto number = [&](int& i) -> double {
    std::string opt = argv[i], v = need(i);
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || d <= 0) {
      std::fprintf(stderr, "bench_table_build: bad value for %s: %s\n", opt.c_str(), v.c_str());
      usage(2);
    }
    return d;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help")
      usage(0);
    else if (a == "--json")
      cfg.json_path = need(i);
    else if (a == "--ehelf")
      cfg.ehelf_path = need(i);
    else if (a == "--no-peers")
      cfg.peers = false;
    else if (a == "--max-seconds")
      cfg.max_seconds = number(i);
    else if (a == "--min-reps")
      cfg.min_reps = static_cast<int>(number(i));
    else if (a == "--max-reps")
      cfg.max_reps = static_cast<int>(number(i));
    else if (a == "--peer-runs")
      cfg.peer_runs = static_cast<int>(number(i));
    else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "bench_table_build: unknown option %s\n", a.c_str());
      usage(2);
    } else
      cfg.files.push_back(a);
  }
  cfg.max_reps = std::max(cfg.max_reps, cfg.min_reps);

  std::string command;
  for (int i = 0; i < argc; ++i)
    command += (i ? " " : "") + shell_quote(argv[i]);

  if (cfg.files.empty()) {
    cfg.files = {std::string(kLibDir) + "/libc.so.6", std::string(kLibDir) + "/libstdc++.so.6"};
    if (auto big = largest_so_with_eh_frame(kLibDir))
      cfg.files.push_back(*big);
    else
      std::fprintf(stderr, "bench_table_build: no .so with .eh_frame under %s\n", kLibDir);
  }

  std::string ehelf_bin = cfg.peers ? find_ehelf(cfg) : std::string();
  bool have_readelf = cfg.peers && !first_line_of("readelf --version 2>/dev/null").empty();

  json report;
  report["benchmark"] = "table_build";
  report["date"] = now_iso8601();
  report["kernel"] = kernel_release();
  report["cpu"] = cpu_model();
  report["cpus_online"] = sysconf(_SC_NPROCESSORS_ONLN);
  report["command"] = command;
  report["load_average_start"] = load_average();
  report["compiler"] = __VERSION__;
#ifdef NDEBUG
  report["assertions"] = false;
#else
  report["assertions"] = true;
#endif
  report["readelf_version"] =
      have_readelf ? json(first_line_of("readelf --version")) : json(nullptr);
  report["ehelf"] = ehelf_bin.empty() ? json(nullptr) : json(ehelf_bin);
  report["config"] = {{"min_reps", cfg.min_reps},
                      {"max_reps", cfg.max_reps},
                      {"max_seconds_per_file", cfg.max_seconds},
                      {"peer_runs", cfg.peer_runs},
                      {"timed", "load_module_cfi + build_unwind_table (default LoadOptions), "
                                "median; destruction not timed"},
                      {"peak_rss", "VmHWM growth over the first load+build in a forked child "
                                   "(VmHWM reset via /proc/self/clear_refs when permitted)"}};
  report["files"] = json::array();

  int failures = 0;
  for (const auto& path : cfg.files) {
    std::fprintf(stderr, "bench_table_build: %s ...\n", path.c_str());
    warm_page_cache(path);
    json f = measure_in_child(path, cfg);
    f["path"] = path;
    std::error_code ec;
    fs::path canon = fs::canonical(path, ec);
    f["resolved_path"] = ec ? json(nullptr) : json(canon.string());
    if (f.contains("error")) {
      ++failures;
      report["files"].push_back(std::move(f));
      continue;
    }
    if (have_readelf) {
      f["readelf"] = measure_peer({"readelf", "-wF", path}, cfg.peer_runs);
      if (f["readelf"].contains("median_ms") && f.contains("parse_and_build"))
        f["speedup_vs_readelf"] = f["readelf"]["median_ms"].get<double>() /
                                  f["parse_and_build"]["median_ms"].get<double>();
    }
    if (!ehelf_bin.empty()) {
      f["ehelf_dump"] = measure_peer({ehelf_bin, "dump", path}, cfg.peer_runs);
      if (have_readelf && f["readelf"].contains("median_ms") &&
          f["ehelf_dump"].contains("median_ms"))
        f["dump_speedup_vs_readelf"] =
            f["readelf"]["median_ms"].get<double>() / f["ehelf_dump"]["median_ms"].get<double>();
    }
    report["files"].push_back(std::move(f));
  }

  report["load_average_end"] = load_average();
  std::printf(
      "# table_build  date: %s  kernel: %s  cpu: %s\n", report["date"].get<std::string>().c_str(),
      report["kernel"].get<std::string>().c_str(), report["cpu"].get<std::string>().c_str());
  std::printf("# command: %s\n", command.c_str());
  std::printf("# load average at start: %s, at end: %s\n",
              report["load_average_start"].get<std::string>().c_str(),
              report["load_average_end"].get<std::string>().c_str());
  std::printf("# build ms = load_module_cfi + build_unwind_table, median of N runs; peers: median "
              "of %d runs, output to /dev/null\n",
              cfg.peer_runs);
  print_table(report);

  if (!cfg.json_path.empty()) {
    std::ofstream out(cfg.json_path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "bench_table_build: cannot write %s\n", cfg.json_path.c_str());
      return 1;
    }
  }
  return failures ? 1 : 0;
}
