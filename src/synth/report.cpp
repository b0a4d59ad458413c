#include "synth/report.hpp"

#include <iterator>

#include <fmt/format.h>

#include "x86/elf_code.hpp"

namespace ehelf::synth {

namespace {

uint64_t failed_functions(const SynthResult& r) {
  uint64_t failed = 0;
  for (const SynthFunction& f : r.functions)
    failed += !f.failure.empty();
  return failed;
}

} // namespace

std::string render_text(const ReportInput& in) {
  const SynthResult& r = *in.result;
  std::string out;
  auto line = std::back_inserter(out);
  for (const Conflict& c : r.conflicts)
    fmt::format_to(line, "conflict: {} at {:#x}: {} vs {}\n", c.function, c.address,
                   describe(c.first), describe(c.second));
  if (const Comparison* cmp = in.comparison) {
    for (size_t i = 0; i < cmp->disagreements.size() && i < in.max_print; ++i) {
      const Disagreement& d = cmp->disagreements[i];
      fmt::format_to(line, "{} {:#x} {:<32} {}: synthesized {} | shipped {}\n",
                     r.functions[d.function].name, d.address,
                     x86::instruction_text(*in.elf, d.address), d.category, d.synthesized,
                     d.shipped);
    }
    for (const auto& [category, n] : cmp->by_category)
      fmt::format_to(line, "disagreements: {}: {}\n", category, n);
    fmt::format_to(line,
                   "agreeing: {}/{} instructions ({:.3f}%), {} analysed instructions without a "
                   "shipped row\n",
                   cmp->agreeing, cmp->instructions,
                   cmp->instructions ? 100.0 * double(cmp->agreeing) / double(cmp->instructions)
                                     : 100.0,
                   cmp->uncovered);
    fmt::format_to(line,
                   "coverage: {} of {} bytes with shipped rows analysed ({:.3f}%); not analysed "
                   "there: {} instructions besides the PLT and padding\n",
                   cmp->shipped_bytes - cmp->missed_bytes, cmp->shipped_bytes,
                   cmp->shipped_bytes ? 100.0 * double(cmp->shipped_bytes - cmp->missed_bytes) /
                                            double(cmp->shipped_bytes)
                                      : 100.0,
                   cmp->missed_instructions);
  }
  const double mb = double(r.text_bytes) / 1e6;
  fmt::format_to(line,
                 "functions: {} ({} not fully analysed), instructions: {}, rows: {}, conflicts: "
                 "{}, jump tables: {} ({} other indirect jumps), time: {:.3f} s, .text: {:.2f} MB "
                 "({:.2f} MB/s)\n",
                 r.functions.size(), failed_functions(r), r.instructions.size(),
                 r.table.row_count(), r.conflicts.size(), r.jump_tables,
                 r.unresolved_indirect_jumps, in.seconds, mb,
                 in.seconds > 0 ? mb / in.seconds : 0.0);
  return out;
}

nlohmann::json to_json(const ReportInput& in) {
  using nlohmann::json;
  const SynthResult& r = *in.result;
  json j = {{"file", in.file},
            {"functions", r.functions.size()},
            {"functions_failed", failed_functions(r)},
            {"instructions", r.instructions.size()},
            {"rows", r.table.row_count()},
            {"ranges", r.table.ranges().size()},
            {"conflicts", r.conflicts.size()},
            {"jump_tables", r.jump_tables},
            {"lsdas", r.lsdas_found},
            {"lsdas_matched", r.lsdas_matched},
            {"unresolved_indirect_jumps", r.unresolved_indirect_jumps},
            {"text_bytes", r.text_bytes},
            {"seconds", in.seconds}};
  json failures = json::array();
  for (const SynthFunction& f : r.functions)
    if (!f.failure.empty()) failures.push_back({{"function", f.name}, {"reason", f.failure}});
  j["failures"] = std::move(failures);
  if (const Comparison* cmp = in.comparison) {
    j["compared"] = cmp->instructions;
    j["agreeing"] = cmp->agreeing;
    j["uncovered"] = cmp->uncovered;
    j["shipped_bytes"] = cmp->shipped_bytes;
    j["missed_bytes"] = cmp->missed_bytes;
    j["missed_instructions"] = cmp->missed_instructions;
    j["categories"] = cmp->by_category;
    json disagreements = json::array();
    for (size_t i = 0; i < cmp->disagreements.size() && i < in.max_print; ++i) {
      const Disagreement& d = cmp->disagreements[i];
      disagreements.push_back({{"function", r.functions[d.function].name},
                               {"address", fmt::format("{:#x}", d.address)},
                               {"instruction", x86::instruction_text(*in.elf, d.address)},
                               {"category", d.category},
                               {"synthesized", d.synthesized},
                               {"shipped", d.shipped}});
    }
    j["disagreements"] = std::move(disagreements);
  }
  return j;
}

} // namespace ehelf::synth
