// ehelf: command-line entry point. Parses flags and dispatches to the commands; no logic here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <string>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ehelf: fast and trustworthy DWARF stack unwinding for x86_64 Linux"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ehelf 0.1.0");
  ehelf::cli::register_commands(app);
  std::string commands;
  bool first_is_command = false;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
    first_is_command = first_is_command || (argc > 1 && sub->get_name() == argv[1]);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e); // --help, --version
    // One line, like every other ehelf error; a mistyped command is named, with the real ones.
    if (argc > 1 && argv[1][0] != '-' && !first_is_command)
      fmt::print(stderr, "ehelf: unknown command '{}' (commands: {}; see --help)\n", argv[1],
                 commands);
    else if (argc > 1 && argv[1][0] == '-' && e.get_name() == "RequiredError")
      fmt::print(stderr, "ehelf: unknown option '{}' (a command comes first: {}; see --help)\n",
                 argv[1], commands);
    else if (argc == 1)
      fmt::print(stderr, "ehelf: a command is required: {} (see --help)\n", commands);
    else
      fmt::print(stderr, "ehelf: {} (see --help)\n", e.what());
    return 2;
  }
  return ehelf::cli::exit_code();
}
