// `ehelf stats PATH...`: which call-frame instructions real files use — the paper's Tables 3
// and 4 (section 3.2) over the ELF64 x86_64 files found in PATHs (directories are walked
// recursively). The gathering and the tables live in report/cfi_stats; this file does flags, the
// walk and printing (the pool is support/worker_pool).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <set>

#include "cli/commands.hpp"
#include "report/cfi_stats_text.hpp"
#include "support/progress.hpp"
#include "support/worker_pool.hpp"

namespace ehelf::cli {
namespace {

namespace fs = std::filesystem;

struct InputFile {
  std::string path;
  uint64_t size = 0;
};

// Regular files named by `paths` or found under them. Directory symlinks are not followed (no
// loops, no trees counted twice); a file reached twice (hard links, symlinks such as
// libfoo.so -> libfoo.so.1) is kept once.
std::vector<InputFile> collect_files(const std::vector<std::string>& paths,
                                     std::vector<std::string>& problems) {
  std::vector<InputFile> out;
  std::set<std::pair<dev_t, ino_t>> seen;
  auto add = [&](const std::string& p, bool named) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) {
      if (named) problems.push_back(fmt::format("{}: cannot stat", p));
      return; // dangling symlinks inside a tree are not worth a word
    }
    if (!S_ISREG(st.st_mode)) return;
    if (!seen.insert({st.st_dev, st.st_ino}).second) return;
    out.push_back(InputFile{p, static_cast<uint64_t>(st.st_size)});
  };
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      add(path, true);
      continue;
    }
    fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
      problems.push_back(fmt::format("{}: {}", path, ec.message()));
      continue;
    }
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) {
        problems.push_back(fmt::format("{}: {}", path, ec.message()));
        break;
      }
      std::error_code ec2;
      if (it->is_directory(ec2)) continue; // real directories are entered; symlinked ones not
      add(it->path().string(), false);
    }
  }
  return out;
}

} // namespace

void register_stats(CLI::App& app) {
  struct Options {
    std::vector<std::string> paths;
    bool json = false;
    size_t top = 10;
    std::string supported;
    unsigned threads = 2;
    bool no_progress = false;
    bool no_debug_frame = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "stats", "Statistics on the call-frame instructions of ELF files (the paper's Tables 3 "
               "and 4): rule kinds, supported share, opcodes, expressions, rows per FDE");
  cmd->footer(
      "Examples:\n  ehelf stats /usr/lib/x86_64-linux-gnu      # the paper's Tables 3 and 4\n"
      "  ehelf stats --json /usr/bin/gdb");
  cmd->add_option("paths", opt->paths, "ELF files or directories (walked recursively)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_flag("--json", opt->json, "Print one JSON object instead of text tables");
  cmd->add_option("--top", opt->top, "How many of the most common expressions to list")
      ->capture_default_str();
  cmd->add_option("--supported", opt->supported,
                  "Supported set for Table 3, comma-separated: rule classes (undefined, "
                  "same_value, offset, val_offset, register, expression, val_expression, "
                  "architectural, cfa_offset, cfa_expression) and expression shapes (plt, "
                  "deref). Default: " +
                      StatsOptions::supported_to_string(StatsOptions::default_supported()))
      ->check([](const std::string& s) {
        auto r = StatsOptions::parse_supported(s);
        return r ? std::string() : r.error().message;
      });
  cmd->add_option("-j,--threads", opt->threads, "Worker threads")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  cmd->add_flag("--no-progress", opt->no_progress, "Never show the progress bar");
  cmd->add_flag("--no-debug-frame", opt->no_debug_frame, "Only look at .eh_frame");
  cmd->callback([opt] {
    auto start = std::chrono::steady_clock::now();
    StatsOptions so;
    if (!opt->supported.empty()) so.supported = *StatsOptions::parse_supported(opt->supported);
    so.debug_frame = !opt->no_debug_frame;

    std::vector<std::string> problems;
    std::vector<InputFile> files = collect_files(opt->paths, problems);
    for (const auto& p : problems)
      fmt::print(stderr, "ehelf: {}\n", p);
    if (!problems.empty()) set_exit_code(1);
    // Biggest first, so the last file a thread picks up is a small one.
    std::stable_sort(files.begin(), files.end(),
                     [](const InputFile& a, const InputFile& b) { return a.size > b.size; });

    unsigned nthreads =
        static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(opt->threads, files.size())));
    std::vector<CfiStats> parts(nthreads);
    bool progress = !opt->no_progress && files.size() >= 100 && ::isatty(STDERR_FILENO);
    parallel_for(
        files.size(), nthreads,
        [&](unsigned w, size_t i) { parts[w].add_file(files[i].path, so); },
        progress ? [](size_t done, size_t total) {
          print_progress_bar("ehelf stats", done, total, "files");
          if (done == total) clear_progress_bar();
        } : std::function<void(size_t, size_t)>());

    CfiStats total = std::move(parts[0]);
    for (unsigned w = 1; w < nthreads; ++w)
      total.merge(parts[w]);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    // Nothing to count is not a result: say why, and fail (as for an unreadable file).
    if (total.files_with_cfi == 0) {
      fmt::print(stderr,
                 "ehelf: no ELF64 x86_64 file with call-frame tables among {} file{} ({} not ELF, "
                 "{} 32-bit, {} other architectures, {} without .eh_frame or .debug_frame)\n",
                 files.size(), files.size() == 1 ? "" : "s", total.files_not_elf, total.files_elf32,
                 total.files_other_arch, total.files_scanned);
      set_exit_code(1);
      return;
    }
    StatsReport report;
    report.top = opt->top;
    report.seconds = seconds;
    report.threads = nthreads;
    if (opt->json) {
      std::cout << stats_to_json(total, so, report).dump(1) << "\n";
    } else {
      std::string text = render_stats_text(total, so, report);
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
  });
}

} // namespace ehelf::cli
