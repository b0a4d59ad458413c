// check::replay_check: `ehelf check --replay FILE`: the row check run again over a recorded
// trace (trace.hpp), against the modules' own tables or others given per module (e.g. those
// `ehelf synth -o` wrote), without running the program.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "check/validator.hpp"
#include "support/result.hpp"

namespace ehelf::check {

struct ReplayOptions {
  std::string trace;
  // (module, ELF file): judge the module (its path or file name, as --only names it) by the
  // unwind tables of the ELF file instead of its own. The file's addresses are the module's.
  std::vector<std::pair<std::string, std::string>> tables;
};

// The recorded run's summary counts (steps, calls, signals, the program's end) with the checks
// made again: inconsistencies, instructions checked, and those a table could not be judged at
// from the trace (`undetermined`: a rule needing a register or memory word it does not hold).
// An error: the trace is unreadable (file and offset), a module's file is missing or is not the
// recorded one (build id), a --tables file has no tables or names no module of the trace.
Result<CheckResult> replay_check(const ReplayOptions& options);

} // namespace ehelf::check
