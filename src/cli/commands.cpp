#include "cli/commands.hpp"

namespace ehelf::cli {
namespace {
int g_exit_code = 0;
}

int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  if (code > g_exit_code) g_exit_code = code;
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
