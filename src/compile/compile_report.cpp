#include "compile/compile_report.hpp"

#include <iterator>

#include <fmt/format.h>

namespace ehelf {
namespace {

std::string human(uint64_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

} // namespace

std::string render_report_table(const std::vector<CompileReport>& reports) {
  std::string out;
  // The paper's Table 2 columns, plus .eh_frame_hdr, the split of the eh_elf, rows and time.
  fmt::format_to(std::back_inserter(out),
                 "{:<28} {:>11} {:>11} {:>11} {:>11} {:>11} {:>8} {:>7} {:>7} {:>7} {:>8} {:>8}\n",
                 "file", ".text+.rodata", ".eh_frame", ".eh_fr_hdr", "eh_elf code", "eh_elf data",
                 "% orig", "growth", "ranges", "bodies", "fallback", "time ms");
  CompileReport total;
  for (const auto& r : reports) {
    std::string name = r.source.substr(r.source.rfind('/') + 1);
    double pct = r.text_rodata ? 100.0 * (r.eh_elf_text + r.eh_elf_rodata) / r.text_rodata : 0;
    fmt::format_to(std::back_inserter(out),
                   "{:<28} {:>13} {:>11} {:>11} {:>11} {:>11} {:>8.2f} {:>7.2f} {:>7} {:>7} {:>8} "
                   "{:>8.0f}\n",
                   name.substr(0, 28), human(r.text_rodata), human(r.eh_frame),
                   human(r.eh_frame_hdr), human(r.eh_elf_text), human(r.eh_elf_rodata), pct,
                   r.growth(), r.codegen.ranges, r.codegen.bodies, r.codegen.fallback_ranges,
                   r.total_ms());
    total.text_rodata += r.text_rodata;
    total.eh_frame += r.eh_frame;
    total.eh_frame_hdr += r.eh_frame_hdr;
    total.eh_elf_text += r.eh_elf_text;
    total.eh_elf_rodata += r.eh_elf_rodata;
    total.codegen.ranges += r.codegen.ranges;
    total.codegen.bodies += r.codegen.bodies;
    total.codegen.fallback_ranges += r.codegen.fallback_ranges;
    total.load_ms += r.total_ms();
  }
  if (reports.size() > 1) {
    double pct = total.text_rodata
                     ? 100.0 * (total.eh_elf_text + total.eh_elf_rodata) / total.text_rodata
                     : 0;
    fmt::format_to(std::back_inserter(out),
                   "{:<28} {:>13} {:>11} {:>11} {:>11} {:>11} {:>8.2f} {:>7.2f} {:>7} {:>7} {:>8} "
                   "{:>8.0f}\n",
                   "total", human(total.text_rodata), human(total.eh_frame),
                   human(total.eh_frame_hdr), human(total.eh_elf_text), human(total.eh_elf_rodata),
                   pct, total.growth(), total.codegen.ranges, total.codegen.bodies,
                   total.codegen.fallback_ranges, total.load_ms);
  }
  return out;
}

nlohmann::json report_json(const CompileReport& r) {
  return {{"source", r.source},
          {"output", r.output},
          {"text_rodata_bytes", r.text_rodata},
          {"eh_frame_bytes", r.eh_frame},
          {"eh_frame_hdr_bytes", r.eh_frame_hdr},
          {"eh_elf_text_bytes", r.eh_elf_text},
          {"eh_elf_rodata_bytes", r.eh_elf_rodata},
          {"eh_elf_file_bytes", r.eh_elf_file},
          {"growth", r.growth()},
          {"model_rows", r.codegen.table_rows},
          {"model_ranges", r.codegen.model_ranges},
          {"ranges", r.codegen.ranges},
          {"bodies", r.codegen.bodies},
          {"fallback_bodies", r.codegen.fallback_bodies},
          {"fallback_ranges", r.codegen.fallback_ranges},
          {"load_ms", r.load_ms},
          {"codegen_ms", r.codegen_ms},
          {"cc_ms", r.cc_ms},
          {"verification", r.verification
                               ? nlohmann::json{{"checks", r.verification->checks},
                                                {"agreed", r.verification->agreed},
                                                {"both_failed", r.verification->both_failed},
                                                {"fallbacks", r.verification->fallbacks},
                                                {"mismatches", r.verification->mismatch_count}}
                               : nlohmann::json()}};
}

} // namespace ehelf
