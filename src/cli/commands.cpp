#include "cli/commands.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace ehelf::cli {
namespace {
int g_exit_code = 0;
}

int exit_code() {
  return g_exit_code;
}
void keep_until_exit(std::shared_ptr<const void> object) {
  // Never destroyed: the list and what it holds are the exit's to return.
  static auto* kept = new std::vector<std::shared_ptr<const void>>;
  kept->push_back(std::move(object));
}

void set_exit_code(int code) {
  if (code > g_exit_code) g_exit_code = code;
}

void report_error(const Error& error, int code) {
  fmt::print(stderr, "ehelf: {}\n", error.to_string());
  set_exit_code(code);
}

void add_debug_dir_option(CLI::App* cmd, std::vector<std::string>& dirs) {
  cmd->add_option("--debug-dir", dirs,
                  "Look up separate debug files here before /usr/lib/debug (DIR/.build-id/xx/"
                  "yyyy.debug, as gdb's debug-file-directory): a module stripped of its unwind "
                  "tables takes them from its debug file, e.g. one `ehelf synth -o` wrote")
      ->check(CLI::ExistingDirectory)
      ->allow_extra_args(false);
}

void register_commands(CLI::App& app) {
  register_dump(app);
  register_stats(app);
  register_compile(app);
  register_stack(app);
  register_perf(app);
  register_check(app);
  register_verify(app);
  register_synth(app);
  register_record(app);
}

} // namespace ehelf::cli
