// `ehelf verify FILE...`: every unwinding backend against the interpreter on the files' tables.
#include <fmt/format.h>

#include "bpf/bpf_check.hpp"
#include "cli/commands.hpp"
#include "runtime/backend_check.hpp"

namespace ehelf::cli {

void register_verify(CLI::App& app) {
  struct Options {
    std::vector<std::string> files;
    bool compiled = false;
    bool quiet = false;
    bool bpf_rows = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "verify",
      "Check every unwinding backend (compact table, rule-cache hot form, the local walk's "
      "fast path, frame-pointer step, remembered row, cached eh_elf, the in-kernel walk's "
      "BPF rows) against the interpreter at both ends of every range");
  cmd->add_option("files", opt->files, "ELF files")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--compiled", opt->compiled,
                "Also check each file's eh_elf from the cache (see ehelf compile --cache)");
  cmd->add_flag("--bpf-rows", opt->bpf_rows,
                "Also print each file's BPF rows (the in-kernel walk's table): count, bytes, kinds "
                "and why rows stop");
  cmd->add_flag("-q,--quiet", opt->quiet, "Print only files with mismatches or errors");
  cmd->footer("Exit status: 0 when every backend agrees, 1 on a mismatch, 2 when a file could not "
              "be read.\n\nExample:\n  ehelf verify /usr/lib/x86_64-linux-gnu/libc.so.6");
  cmd->callback([opt] {
    std::string rows_summary;
    const TableCheck bpf_rows[] = {[&](const UnwindTable& table) {
      if (opt->bpf_rows) {
        auto rows = encode_bpf_rows(table);
        rows_summary = rows ? describe(*rows) : rows.error().to_string();
      }
      return check_bpf_rows(table);
    }};
    for (const std::string& file : opt->files) {
      rows_summary.clear();
      auto checks = check_file_backends(file, opt->compiled, bpf_rows);
      if (!checks) {
        report_error(checks.error(), 2);
        continue;
      }
      bool ok = true;
      for (const BackendCheck& c : *checks)
        ok = ok && c.ok();
      if (!ok) set_exit_code(1);
      if (opt->quiet && ok) continue;
      if (checks->empty()) fmt::print("{}: no unwind tables\n", file);
      for (const BackendCheck& c : *checks)
        fmt::print("{}: {}\n", file, describe(c));
      if (!rows_summary.empty()) fmt::print("{}: bpf rows: {}\n", file, rows_summary);
    }
  });
}

} // namespace ehelf::cli
