// `ehelf compile`: unwind tables -> eh_elf shared objects (see include/ehelf/eh_elf.h).
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.hpp"
#include "compile/compile_module.hpp"
#include "compile/compile_report.hpp"
#include "eh_elf/eh_elf_cache.hpp"
#include "elf/elf_file.hpp"
#include "support/progress.hpp"
#include "support/worker_pool.hpp"

namespace ehelf::cli {
namespace {} // namespace

void register_compile(CLI::App& app) {
  struct Options {
    std::vector<std::string> files;
    std::string output;
    bool cache = false;
    unsigned jobs = 1;
    std::string registers = "minimal";
    bool report = false;
    bool json = false;
    bool keep_source = false;
    bool verify = false;
    std::string compiler;
    std::string optimization = "-O1";
    std::string lookup = "table";
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("compile", "Compile unwind tables into eh_elf shared objects");
  cmd->footer("Examples:\n  ehelf compile /usr/lib/x86_64-linux-gnu/libc.so.6 -o libc.eh_elf.so "
              "--report --verify\n"
              "  ehelf compile --cache --jobs 2 ./prog /usr/lib/x86_64-linux-gnu/libc.so.6");
  cmd->add_option("files", opt->files, "ELF files")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opt->output, "Output .so (one input file only)");
  cmd->add_flag(
      "--cache", opt->cache,
      "Write into the cache ($EHELF_CACHE, else $XDG_CACHE_HOME/ehelf, else ~/.cache/ehelf), "
      "named by build-id");
  cmd->add_option("-j,--jobs", opt->jobs, "Compile this many files in parallel")
      ->check(CLI::Range(1u, 256u));
  cmd->add_option("--registers", opt->registers, "Register set: minimal or callee-saved")
      ->check(CLI::IsMember({"minimal", "callee-saved"}));
  cmd->add_flag("--report", opt->report, "Print sizes (paper Table 2), fallback rows and times");
  cmd->add_flag("--json", opt->json, "Print the report as JSON");
  cmd->add_flag("--keep-source", opt->keep_source, "Keep the generated C next to the output");
  cmd->add_option("--cc", opt->compiler, "C compiler to use (default $EHELF_CC or cc)");
  cmd->add_option("--opt", opt->optimization, "Optimization flag for the C compiler")
      ->check(CLI::IsMember({"-O0", "-O1", "-O2", "-O3", "-Os"}));
  cmd->add_option(
         "--lookup", opt->lookup,
         "Range lookup: table (16-bit starts + page index) or tree (decision tree in code)")
      ->check(CLI::IsMember({"table", "tree"}));
  cmd->add_flag("--verify", opt->verify,
                "Check each result against the interpreter at the first and last address of "
                "every range (both variants)");
  cmd->callback([opt] {
    if (!opt->output.empty() && opt->files.size() != 1) {
      fmt::print(stderr, "ehelf: -o takes exactly one input file\n");
      set_exit_code(2);
      return;
    }
    if (opt->output.empty() && !opt->cache) {
      fmt::print(stderr, "ehelf: say where to write: -o OUT.so or --cache\n");
      set_exit_code(2);
      return;
    }
    CompileOptions co;
    co.registers = opt->registers == "minimal" ? RegisterSet::Minimal : RegisterSet::CalleeSaved;
    co.toolchain.keep_source = opt->keep_source;
    co.toolchain.compiler = opt->compiler;
    co.toolchain.optimization = opt->optimization;
    co.verify = opt->verify;
    co.lookup = opt->lookup == "table" ? LookupKind::Table : LookupKind::Tree;
    std::string cache_dir;
    if (opt->cache) {
      auto dir = prepare_cache_directory();
      if (!dir) {
        report_error(dir.error());
        return;
      }
      cache_dir = *dir;
    }
    std::vector<std::optional<CompileReport>> results(opt->files.size());
    std::vector<std::string> errors(opt->files.size());
    const bool tty = ::isatty(2) && opt->files.size() > 1;
    // One file (a large library takes tens of seconds): its phases on the terminal instead.
    const bool phases = ::isatty(2) && opt->files.size() == 1;
    if (phases)
      co.on_phase = [file = opt->files[0]](std::string_view what) {
        fmt::print(stderr, "\rehelf compile: {}: {}...\033[K", file, what);
        std::fflush(stderr);
      };
    parallel_for(
        opt->files.size(), opt->jobs,
        [&](unsigned, size_t i) {
          const std::string& file = opt->files[i];
          std::string out = opt->output;
          if (opt->cache) {
            auto elf = ElfFile::open(file);
            std::string id = elf ? (*elf)->build_id_hex() : std::string();
            if (id.empty()) {
              errors[i] = fmt::format("{}: no build-id, so no cache name; use -o", file);
              return;
            }
            out = cache_dir + "/" + cache_file_name(id, co.registers);
          }
          auto r = compile_module(file, out, co);
          if (r)
            results[i] = std::move(*r);
          else
            errors[i] = r.error().to_string();
        },
        tty ? [](size_t done, size_t total) {
          print_progress_bar("ehelf compile", done, total, "files");
          if (done == total) clear_progress_bar();
        } : std::function<void(size_t, size_t)>());

    if (phases) clear_progress_bar();
    std::vector<CompileReport> ok;
    bool too_large = false;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!errors[i].empty()) {
        fmt::print(stderr, "ehelf: {}\n", errors[i]);
        if (errors[i].find(kTooLargeToCompile) != std::string::npos)
          too_large = true;
        else
          set_exit_code(1);
      } else if (results[i]) {
        ok.push_back(*results[i]);
        if (const auto& v = results[i]->verification) {
          fmt::print(stderr, "{}: verify: {}\n", opt->files[i], describe(*v));
          if (!v->ok()) set_exit_code(1);
        }
      }
    }
    // 3: every file compiled but some were too large (left to the table backend); 1 wins.
    if (too_large && exit_code() == 0) set_exit_code(3);
    if (opt->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : ok)
        j.push_back(report_json(r));
      fmt::print("{}\n", j.dump(1));
    } else if (opt->report) {
      const std::string table = render_report_table(ok);
      std::fwrite(table.data(), 1, table.size(), stdout);
    }
  });
}

} // namespace ehelf::cli
