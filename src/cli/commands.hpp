// The ehelf subcommands. Each registers its flags on the CLI11 app and runs when selected.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/result.hpp"

namespace ehelf::cli {

void register_commands(CLI::App& app);
// Exit status of the command that ran.
int exit_code();
void set_exit_code(int code);
// The command's one line for an error ("ehelf: FILE: SECTION+OFFSET: what"), and exit status
// `code` (set_exit_code).
void report_error(const Error& error, int code = 1);

// Hands `object` to the process's exit instead of its destructor: a run's modules, symbols and
// mappings are thousands of allocations and mappings whose freeing one by one took a tenth of
// ehelf perf's time (g++'s recording: 4 ms of 38) for memory that the exit returns at once. Only
// for what has nothing to do when destroyed but free memory. It stays reachable from a static
// list (LeakSanitizer does not count it as a leak).
void keep_until_exit(std::shared_ptr<const void> object);
template <class T> T& kept_until_exit(std::unique_ptr<T> object) {
  T& kept = *object;
  keep_until_exit(std::shared_ptr<const void>(std::move(object)));
  return kept;
}

// --debug-dir DIR (repeatable), for the commands that unwind with the runtime: where separate
// debug files are looked up before /usr/lib/debug.
void add_debug_dir_option(CLI::App* cmd, std::vector<std::string>& dirs);

// One per command file:
void register_dump(CLI::App& app);
void register_stats(CLI::App& app);
void register_compile(CLI::App& app);
void register_stack(CLI::App& app);
void register_perf(CLI::App& app);
void register_check(CLI::App& app);
void register_verify(CLI::App& app);
void register_synth(CLI::App& app);
void register_record(CLI::App& app);

} // namespace ehelf::cli
