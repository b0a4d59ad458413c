#include "perf/script_output.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <iterator>
#include <nlohmann/json.hpp>

namespace ehelf::perf {

void write_script(std::ostream& out, const SampleStack& s, const ScriptOptions& o) {
  // Formats compiled (FMT_COMPILE) into one buffer kept between samples: this runs once per
  // frame of a recording, and parsing format strings at run time was a third of ehelf perf's
  // time on a system-wide recording.
  thread_local fmt::memory_buffer text;
  text.clear();
  auto it = std::back_inserter(text);
  auto symbol = [&](const StackFrame& f) {
    if (f.symbol.empty()) {
      fmt::format_to(it, FMT_COMPILE("[unknown]"));
      return;
    }
    text.append(f.symbol);
    if (o.offsets) fmt::format_to(it, FMT_COMPILE("+{:#x}"), f.symbol_offset);
  };
  auto module = [&](const StackFrame& f) {
    if (f.module.empty())
      fmt::format_to(it, FMT_COMPILE("[unknown]"));
    else
      text.append(f.module);
  };
  const uint64_t seconds = s.time / 1000000000, micros = (s.time % 1000000000) / 1000;
  if (s.ip_only && s.frames.size() == 1 && !o.stop) {
    // perf script's one-line form: "%16s %5d/%-5d %5lu.%06lu: " then " %16lx sym (dso)".
    const StackFrame& f = s.frames.front();
    fmt::format_to(it, FMT_COMPILE("{:>16} {:>5}/{:<5} {:>5}.{:06}:  {:>16x} "), s.comm, s.pid,
                   s.tid, seconds, micros, f.pc);
    symbol(f);
    text.append(std::string_view(" ("));
    module(f);
    text.append(std::string_view(")\n"));
  } else {
    // perf script's widths: "%s %5d/%-5d %5lu.%06lu: ".
    fmt::format_to(it, FMT_COMPILE("{} {:>5}/{:<5} {:>5}.{:06}: \n"), s.comm, s.pid, s.tid, seconds,
                   micros);
    for (const StackFrame& f : s.frames) {
      fmt::format_to(it, FMT_COMPILE("\t{:>16x} "), f.dso_address);
      symbol(f);
      text.append(std::string_view(" ("));
      module(f);
      text.append(std::string_view(")\n"));
    }
    if (o.stop) fmt::format_to(it, FMT_COMPILE("\t(walk ended: {})\n"), s.stop);
    text.append(std::string_view("\n"));
  }
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
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
