// The output of `ehelf check` as text and JSON.
#include "check/report.hpp"

#include <cstring>
#include <fmt/format.h>
#include <iterator>
#include <sys/wait.h>

#include "support/safe_text.hpp"

namespace ehelf::check {
namespace {

std::string program_end(const CheckSummary& s) {
  if (s.interrupted)
    return fmt::format("interrupted by SIG{} (program killed)", sigabbrev_np(s.interrupted));
  if (s.step_limit) return "stopped at the step limit (program killed)";
  if (s.exec_detached) return "the program called exec: left to run unchecked";
  if (s.exit_status < 0) return "killed";
  if (WIFEXITED(s.exit_status)) return fmt::format("exited with {}", WEXITSTATUS(s.exit_status));
  if (WIFSIGNALED(s.exit_status))
    return fmt::format("killed by signal {}", WTERMSIG(s.exit_status));
  return "ended";
}

double rate(const CheckSummary& s) {
  return s.seconds > 0 ? double(s.steps) / s.seconds : 0;
}

} // namespace

std::string format_text(const CheckResult& result) {
  std::string out;
  auto o = std::back_inserter(out);
  for (const Inconsistency& r : result.inconsistencies) {
    // Module paths and function names come from outside (files, /proc, a replayed trace).
    fmt::format_to(o, "{}: {:#x}{}{}: {}\n", message_safe(r.module), r.address,
                   r.function.empty() ? "" : " ", message_safe(r.function), r.instruction);
    fmt::format_to(o, "  row: {}\n", r.row);
    fmt::format_to(o, "  {}: expected {}, table says {}\n", r.column, r.expected, r.table);
  }
  const CheckSummary& s = result.summary;
  if (!result.uncovered.empty()) {
    fmt::format_to(o, "{} instructions ran in {} functions without unwind rows:", s.no_row,
                   result.uncovered.size());
    for (const std::string& u : result.uncovered)
      fmt::format_to(o, " {};", message_safe(u));
    out.back() = '\n';
  }
  fmt::format_to(o,
                 "{} inconsistenc{}; {} instructions checked ({} steps), {} distinct addresses, "
                 "{} functions, {} modules, {} thread{}",
                 result.inconsistencies.size(), result.inconsistencies.size() == 1 ? "y" : "ies",
                 s.checked, s.steps, s.distinct_addresses, s.functions, s.modules, s.threads,
                 s.threads == 1 ? "" : "s");
  if (s.processes > 1) fmt::format_to(o, " in {} processes", s.processes);
  if (s.execs) fmt::format_to(o, ", {} left to run unchecked at exec", s.execs);
  out += '\n';
  fmt::format_to(o,
                 "{} calls, {} resynchronisations, {} signal handlers; {:.2f} s, {:.0f} "
                 "instructions/s; {}\n",
                 s.calls, s.resyncs, s.signals, s.seconds, rate(s), program_end(s));
  if (s.undetermined)
    fmt::format_to(o,
                   "{} instructions not judged: a rule of the tables needs a register or memory "
                   "word the trace does not hold\n",
                   s.undetermined);
  return out;
}

nlohmann::json to_json(const CheckResult& result) {
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json list = nlohmann::json::array();
  for (const Inconsistency& r : result.inconsistencies)
    list.push_back({{"module", r.module},
                    {"address", r.address},
                    {"function", r.function},
                    {"instruction", r.instruction},
                    {"row", r.row},
                    {"column", r.column},
                    {"expected", r.expected},
                    {"table", r.table},
                    {"tid", r.tid}});
  out["inconsistencies"] = std::move(list);
  out["uncovered"] = result.uncovered;
  const CheckSummary& s = result.summary;
  out["summary"] = {{"steps", s.steps},
                    {"checked", s.checked},
                    {"distinct_addresses", s.distinct_addresses},
                    {"functions", s.functions},
                    {"modules", s.modules},
                    {"threads", s.threads},
                    {"calls", s.calls},
                    {"resyncs", s.resyncs},
                    {"signals", s.signals},
                    {"no_row", s.no_row},
                    {"jump_rows", s.jump_rows},
                    {"blocks", s.blocks},
                    {"block_mismatches", s.block_mismatches},
                    {"blocks_among_threads", s.blocks_among_threads},
                    {"unchecked_signal_steps", s.unchecked_signal_steps},
                    {"undetermined", s.undetermined},
                    {"processes", s.processes},
                    {"execs", s.execs},
                    {"seconds", s.seconds},
                    {"instructions_per_second", rate(s)},
                    {"step_limit", s.step_limit},
                    {"interrupted", s.interrupted},
                    {"program", program_end(s)}};
  return out;
}

} // namespace ehelf::check
