#include "perf/script_output.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ehelf::perf {

void write_script(std::ostream& out, const SampleStack& s, const ScriptOptions& o) {
  if (s.ip_only && s.frames.size() == 1 && !o.stop) {
    // perf script's one-line form: "%16s %5d/%-5d %5lu.%06lu: " then " %16lx sym (dso)".
    const StackFrame& f = s.frames.front();
    std::string sym = f.symbol.empty() ? "[unknown]" : f.symbol;
    if (o.offsets && !f.symbol.empty()) sym += fmt::format("+{:#x}", f.symbol_offset);
    out << fmt::format("{:>16} {:>5}/{:<5} {:>5}.{:06}:  {:>16x} {} ({})\n", s.comm, s.pid, s.tid,
                       s.time / 1000000000, (s.time % 1000000000) / 1000, f.pc, sym,
                       f.module.empty() ? "[unknown]" : f.module);
    return;
  }
  // perf script's widths: "%s %5d/%-5d %5lu.%06lu: ".
  std::string text = fmt::format("{} {:>5}/{:<5} {:>5}.{:06}: \n", s.comm, s.pid, s.tid,
                                 s.time / 1000000000, (s.time % 1000000000) / 1000);
  for (const StackFrame& f : s.frames) {
    std::string sym = f.symbol.empty() ? "[unknown]" : f.symbol;
    if (o.offsets && !f.symbol.empty()) sym += fmt::format("+{:#x}", f.symbol_offset);
    text += fmt::format("\t{:>16x} {} ({})\n", f.dso_address, sym,
                        f.module.empty() ? "[unknown]" : f.module);
  }
  if (o.stop) text += fmt::format("\t(walk ended: {})\n", s.stop);
  text += "\n";
  out << text;
}

void write_json_line(std::ostream& out, const SampleStack& s) {
  nlohmann::json frames = nlohmann::json::array();
  for (const StackFrame& f : s.frames)
    // Addresses as hex strings: a u64 above 2^53 loses precision as a JSON number in jq and
    // JavaScript.
    frames.push_back({{"pc", fmt::format("{:#x}", f.pc)},
                      {"symbol", f.symbol},
                      {"offset", f.symbol_offset},
                      {"module", f.module}});
  nlohmann::json j = {{"comm", s.comm},
                      {"pid", s.pid},
                      {"tid", s.tid},
                      {"time", s.time},
                      {"period", s.period},
                      {"stop", s.stop},
                      {"frames", std::move(frames)}};
  // Names come from binaries: invalid UTF-8 is replaced rather than thrown on.
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

} // namespace ehelf::perf
