// ehelf: command-line entry point. Parses flags and dispatches to the commands; no logic here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ehelf: fast and trustworthy DWARF stack unwinding for x86_64 Linux"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ehelf 0.1.0");
  ehelf::cli::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e); // --help, --version
    // One line, like every other ehelf error.
    fmt::print(stderr, "ehelf: {} (see --help)\n", e.what());
    return 2;
  }
  return ehelf::cli::exit_code();
}
