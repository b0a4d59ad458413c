// ehelf: command-line entry point. Parses flags and dispatches to the commands; no logic here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fmt/format.h>
#include <new>
#include <string>
#include <unistd.h>

#include "cli/commands.hpp"
#include "support/safe_text.hpp"

namespace {

int run(int argc, char** argv);

// The last resort, where main's catch cannot reach: an exception leaving a thread, or thrown
// while another unwinds (a library's destructor that allocates, as nlohmann::json's does, when
// memory is exhausted). One line and exit status 2 instead of an abort; without an exception in
// flight, termination is a bug of ehelf's own and aborts as usual. Nothing here allocates.
[[noreturn]] void on_terminate() {
  if (std::exception_ptr in_flight = std::current_exception()) {
    try {
      std::rethrow_exception(in_flight);
    } catch (const std::bad_alloc&) {
      std::fputs("ehelf: out of memory\n", stderr);
    } catch (const std::exception& e) {
      std::fputs("ehelf: ", stderr);
      for (const char* c = e.what(); *c; ++c)
        std::fputc(static_cast<unsigned char>(*c) < 0x20 ? ' ' : *c, stderr);
      std::fputc('\n', stderr);
    } catch (...) {
      std::fputs("ehelf: unexpected error\n", stderr);
    }
    ::_exit(2);
  }
  std::abort();
}

} // namespace

int main(int argc, char** argv) {
  // Installed setuid or setgid, ehelf would run commands, attach to processes and write files
  // with privileges its user does not have: it runs only with those it was started with (root,
  // or capabilities given to the file or the process).
  if (::getuid() != ::geteuid() || ::getgid() != ::getegid()) {
    std::fputs("ehelf: refusing to run setuid or setgid (real and effective user or group ids "
               "differ): run it as root or give it capabilities instead\n",
               stderr);
    // Nothing has started, so no exit handler has work to do; a sanitizer build's exit-time
    // leak check would fail in this non-dumpable process (its /proc entries are not its own).
    ::_exit(2);
  }
  // No command ends in an uncaught exception: whatever escapes one (memory exhausted, a library's
  // throw) is one line and a non-zero exit, never an abort. Caught here, the command's
  // destructors run (its unfinished outputs are removed).
  std::set_terminate(on_terminate);
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("ehelf: out of memory\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ehelf: %s\n", ehelf::message_safe(e.what()).c_str());
  } catch (...) {
    std::fputs("ehelf: unexpected error\n", stderr);
  }
  return 2;
}

namespace {

int run(int argc, char** argv) {
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

} // namespace
