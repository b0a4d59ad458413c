// `ehelf compile`: unwind tables -> eh_elf shared objects (see include/ehelf/eh_elf.h).
#include <atomic>
#include <cstdio>
#include <fmt/format.h>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "cli/commands.hpp"
#include "compile/compile_module.hpp"
#include "eh_elf/eh_elf_cache.hpp"
#include "elf/elf_file.hpp"

namespace ehelf::cli {
namespace {

std::string human(uint64_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

void print_report_table(const std::vector<CompileReport>& reports) {
  // The paper's Table 2 columns, plus .eh_frame_hdr, the split of the eh_elf, rows and time.
  fmt::print("{:<28} {:>11} {:>11} {:>11} {:>11} {:>11} {:>8} {:>7} {:>7} {:>7} {:>8} {:>8}\n",
             "file", ".text+.rodata", ".eh_frame", ".eh_fr_hdr", "eh_elf code", "eh_elf data",
             "% orig", "growth", "ranges", "bodies", "fallback", "time ms");
  CompileReport total;
  for (const auto& r : reports) {
    std::string name = r.source.substr(r.source.rfind('/') + 1);
    double pct = r.text_rodata ? 100.0 * (r.eh_elf_text + r.eh_elf_rodata) / r.text_rodata : 0;
    fmt::print("{:<28} {:>13} {:>11} {:>11} {:>11} {:>11} {:>8.2f} {:>7.2f} {:>7} {:>7} {:>8} "
               "{:>8.0f}\n",
               name.substr(0, 28), human(r.text_rodata), human(r.eh_frame), human(r.eh_frame_hdr),
               human(r.eh_elf_text), human(r.eh_elf_rodata), pct, r.growth(), r.codegen.ranges,
               r.codegen.bodies, r.codegen.fallback_ranges, r.total_ms());
    total.text_rodata += r.text_rodata;
    total.eh_frame += r.eh_frame;
    total.eh_frame_hdr += r.eh_frame_hdr;
    total.eh_elf_text += r.eh_elf_text;
    total.eh_elf_rodata += r.eh_elf_rodata;
    total.codegen.ranges += r.codegen.ranges;
    total.codegen.bodies += r.codegen.bodies;
    total.codegen.fallback_ranges += r.codegen.fallback_ranges;
    total.load_ms += r.total_ms();
  }
  if (reports.size() > 1) {
    double pct = total.text_rodata
                     ? 100.0 * (total.eh_elf_text + total.eh_elf_rodata) / total.text_rodata
                     : 0;
    fmt::print("{:<28} {:>13} {:>11} {:>11} {:>11} {:>11} {:>8.2f} {:>7.2f} {:>7} {:>7} {:>8} "
               "{:>8.0f}\n",
               "total", human(total.text_rodata), human(total.eh_frame), human(total.eh_frame_hdr),
               human(total.eh_elf_text), human(total.eh_elf_rodata), pct, total.growth(),
               total.codegen.ranges, total.codegen.bodies, total.codegen.fallback_ranges,
               total.load_ms);
  }
}

nlohmann::json report_json(const CompileReport& r) {
  return {{"source", r.source},
          {"output", r.output},
          {"text_rodata_bytes", r.text_rodata},
          {"eh_frame_bytes", r.eh_frame},
          {"eh_frame_hdr_bytes", r.eh_frame_hdr},
          {"eh_elf_text_bytes", r.eh_elf_text},
          {"eh_elf_rodata_bytes", r.eh_elf_rodata},
          {"eh_elf_file_bytes", r.eh_elf_file},
          {"growth", r.growth()},
          {"model_rows", r.codegen.table_rows},
          {"model_ranges", r.codegen.model_ranges},
          {"ranges", r.codegen.ranges},
          {"bodies", r.codegen.bodies},
          {"fallback_bodies", r.codegen.fallback_bodies},
          {"fallback_ranges", r.codegen.fallback_ranges},
          {"load_ms", r.load_ms},
          {"codegen_ms", r.codegen_ms},
          {"cc_ms", r.cc_ms},
          {"verification", r.verification
                               ? nlohmann::json{{"checks", r.verification->checks},
                                                {"agreed", r.verification->agreed},
                                                {"both_failed", r.verification->both_failed},
                                                {"fallbacks", r.verification->fallbacks},
                                                {"mismatches", r.verification->mismatch_count}}
                               : nlohmann::json()}};
}

} // namespace

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
        fmt::print(stderr, "ehelf: {}\n", dir.error().to_string());
        set_exit_code(1);
        return;
      }
      cache_dir = *dir;
    }
    std::vector<std::optional<CompileReport>> results(opt->files.size());
    std::vector<std::string> errors(opt->files.size());
    std::atomic<size_t> next{0}, done{0};
    std::mutex progress_lock;
    bool tty = ::isatty(2) && opt->files.size() > 1;
    auto worker = [&] {
      for (size_t i; (i = next++) < opt->files.size();) {
        const std::string& file = opt->files[i];
        std::string out = opt->output;
        if (opt->cache) {
          auto elf = ElfFile::open(file);
          std::string id = elf ? (*elf)->build_id_hex() : std::string();
          if (id.empty()) {
            errors[i] = fmt::format("{}: no build-id, so no cache name; use -o", file);
          } else {
            out = cache_dir + "/" + cache_file_name(id, co.registers);
          }
        }
        if (errors[i].empty()) {
          auto r = compile_module(file, out, co);
          if (r)
            results[i] = std::move(*r);
          else
            errors[i] = r.error().to_string();
        }
        size_t d = ++done;
        if (tty) {
          std::lock_guard<std::mutex> g(progress_lock);
          fmt::print(stderr, "\r[{}/{}] {:<60.60}", d, opt->files.size(), file);
          if (d == opt->files.size()) fmt::print(stderr, "\r{:80}\r", "");
        }
      }
    };
    std::vector<std::thread> threads;
    unsigned n = std::min<unsigned>(opt->jobs, static_cast<unsigned>(opt->files.size()));
    for (unsigned t = 1; t < n; ++t)
      threads.emplace_back(worker);
    worker();
    for (auto& t : threads)
      t.join();

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
          fmt::print(stderr,
                     "{}: verify: {} checks, {} agree, {} both refuse, {} need the interpreter, "
                     "{} mismatches\n",
                     opt->files[i], v->checks, v->agreed, v->both_failed, v->fallbacks,
                     v->mismatch_count);
          for (const auto& m : v->mismatches)
            fmt::print(stderr, "  mismatch: {}\n", m);
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
      print_report_table(ok);
    }
  });
}

} // namespace ehelf::cli
