// `ehelf check [--from SYMBOL|--from-entry] [--only MODULE]... [--json] -- PROG ARGS...`: runs
// PROG one instruction at a time and reports where its unwind tables disagree with the
// execution (check/validator.hpp). Exit 0: consistent; 1: an inconsistency; 2: usage or tracing
// error.
#include <cstdio>
#include <fmt/format.h>
#include <memory>

#include "check/report.hpp"
#include "check/validator.hpp"
#include "cli/commands.hpp"

namespace ehelf::cli {

void register_check(CLI::App& app) {
  struct Options {
    check::CheckOptions check;
    std::string from;
    bool from_entry = false;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "check", "Run a program one instruction at a time and check its unwind tables against "
               "the execution");
  auto* from = cmd->add_option("--from", opt->from,
                               "Start checking at this symbol of the program "
                               "(default: main)");
  cmd->add_flag("--from-entry", opt->from_entry,
                "Start at the first instruction (the dynamic loader's entry point)")
      ->excludes(from);
  cmd->add_option("--only", opt->check.only,
                  "Check only this module (path or file name; repeatable); others still run");
  cmd->add_option("--max-steps", opt->check.max_steps,
                  "Stop after this many instructions (the program is killed; 0: no limit)");
  cmd->add_flag("--single-step", opt->check.single_step,
                "Stop at every instruction (by default straight-line runs the x86 layer can "
                "follow go to a breakpoint and are checked from their starting state)");
  cmd->add_flag("--randomize", opt->check.randomize,
                "Keep the program's address-space randomisation (by default it runs without, as "
                "under gdb, so that runs repeat)");
  cmd->add_flag("--json", opt->json, "Print the result as JSON");
  cmd->add_option("command", opt->check.argv, "The program and its arguments (after --)")
      ->required();
  cmd->callback([opt] {
    check::CheckOptions& o = opt->check;
    if (opt->from_entry)
      o.start = check::CheckOptions::Start::entry;
    else if (!opt->from.empty()) {
      o.start = check::CheckOptions::Start::symbol;
      o.from_symbol = opt->from;
    }
    auto result = check::run_check(o);
    if (!result) {
      const Error& e = result.error();
      fmt::print(stderr, "ehelf: check: {}\n", e.file.empty() ? e.message : e.to_string());
      set_exit_code(2);
      return;
    }
    if (opt->json)
      fmt::print("{}\n", check::to_json(*result).dump(2));
    else
      fmt::print("{}", check::format_text(*result));
    set_exit_code(result->inconsistencies.empty() ? 0 : 1);
  });
}

} // namespace ehelf::cli
