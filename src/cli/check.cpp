// `ehelf check [--from SYMBOL|--from-entry] [--only MODULE]... [--record FILE] [--json] -- PROG
// ARGS...`: runs PROG one instruction at a time and reports where its unwind tables disagree with
// the execution (check/validator.hpp); `ehelf check --replay FILE [--tables MODULE=ELF]...` judges
// a recorded run again (check/replay.hpp). Exit 0: consistent; 1: an inconsistency; 2: usage,
// tracing or trace-reading error.
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <optional>

#include "check/replay.hpp"
#include "check/report.hpp"
#include "check/validator.hpp"
#include "cli/commands.hpp"
#include "runtime/ptrace_process.hpp"

namespace ehelf::cli {

void register_check(CLI::App& app) {
  struct Options {
    check::CheckOptions check;
    check::ReplayOptions replay;
    std::vector<std::string> tables;
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
                               "(default: main; in a stripped program, the address _start "
                               "passes to __libc_start_main)");
  auto* from_entry =
      cmd->add_flag("--from-entry", opt->from_entry,
                    "Start at the first instruction (the dynamic loader's entry point)")
          ->excludes(from);
  auto* only =
      cmd->add_option("--only", opt->check.only,
                      "Check only this module (path or file name; repeatable); others still run");
  auto* max_steps =
      cmd->add_option("--max-steps", opt->check.max_steps,
                      "Stop after this many instructions (the program is killed; 0: no limit)");
  auto* single_step =
      cmd->add_flag("--single-step", opt->check.single_step,
                    "Stop at every instruction (by default straight-line runs the x86 layer can "
                    "follow go to a breakpoint and are checked from their starting state)");
  auto* randomize = cmd->add_flag(
      "--randomize", opt->check.randomize,
      "Keep the program's address-space randomisation (by default it runs without, as "
      "under gdb, so that runs repeat)");
  auto* follow_fork =
      cmd->add_flag("--follow-fork", opt->check.follow_fork,
                    "Check the children the program forks too (by default they run unchecked)");
  auto* record = cmd->add_option("--record", opt->check.record,
                                 "Write the checked path to FILE, for --replay");
  auto* replay =
      cmd->add_option("--replay", opt->replay.trace,
                      "Check a path written by --record again, without running the program");
  cmd->add_option("--tables", opt->tables,
                  "With --replay: judge MODULE (path or file name) by the unwind tables of ELF "
                  "(e.g. one ehelf synth -o wrote) instead of its own (repeatable)")
      ->type_name("MODULE=ELF")
      ->needs(replay);
  cmd->add_flag("--json", opt->json, "Print the result as JSON");
  auto* command =
      cmd->add_option("command", opt->check.argv, "The program and its arguments (after --)");
  // A replay runs nothing: the options of a run are the recording's.
  for (CLI::Option* run_option :
       {command, record, from, from_entry, only, max_steps, single_step, randomize, follow_fork})
    replay->excludes(run_option);
  cmd->footer("Exit status: 0 when the tables agree with the execution, 1 on an inconsistency, 2 "
              "on a usage, tracing or trace-reading error.\n\n"
              "Examples:\n"
              "  ehelf check -- ./prog args              # from main, every module\n"
              "  ehelf check --only prog --max-steps 1000000 -- ./prog\n"
              "  ehelf check --record run.trace -- ./prog && "
              "ehelf check --replay run.trace --tables prog=prog.synth");
  cmd->callback([opt] {
    check::CheckOptions& o = opt->check;
    if (opt->replay.trace.empty() && o.argv.empty()) throw CLI::RequiredError("command");
    for (const std::string& t : opt->tables) {
      size_t eq = t.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == t.size())
        throw CLI::ValidationError("--tables", "'" + t + "' is not MODULE=ELF");
      opt->replay.tables.emplace_back(t.substr(0, eq), t.substr(eq + 1));
    }
    if (opt->from_entry)
      o.start = check::CheckOptions::Start::entry;
    else if (!opt->from.empty()) {
      o.start = check::CheckOptions::Start::symbol;
      o.from_symbol = opt->from;
    }
    // A live run stopped by SIGINT, SIGTERM or SIGHUP prints its partial result before dying of
    // the signal (when the guard goes).
    std::optional<TerminationGuard> guard;
    if (opt->replay.trace.empty()) guard.emplace();
    auto result =
        opt->replay.trace.empty() ? check::run_check(o) : check::replay_check(opt->replay);
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
