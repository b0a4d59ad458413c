// `ehelf synth FILE -o OUT` and `ehelf synth --compare FILE`: unwind tables recomputed from the
// machine code (synth/), written as an ELF holding .eh_frame/.eh_frame_hdr, or checked against
// the file's own tables at every analysed instruction.
#include <fmt/format.h>

#include <chrono>
#include <fstream>

#include "cli/commands.hpp"
#include "dwarf/cfi_encoder.hpp"
#include "dwarf/module_cfi.hpp"
#include "synth/compare.hpp"
#include "x86/decoder.hpp"

namespace ehelf::cli {

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", c);
    else
      out += c;
  }
  return out + "\"";
}

} // namespace

void register_synth(CLI::App& app) {
  struct Options {
    std::string file;
    std::string output;
    bool compare = false;
    bool json = false;
    size_t max_print = 50;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "synth", "Recompute the unwind table of an x86_64 ELF from its machine code; write it as an "
               "ELF holding .eh_frame and .eh_frame_hdr, or compare it with the file's own");
  cmd->add_option("file", opt->file, "ELF file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opt->output, "Write the synthesized tables to this ELF file");
  cmd->add_flag("--compare", opt->compare,
                "Compare with the file's own tables at every analysed instruction");
  cmd->add_flag("--json", opt->json, "Print the statistics (and disagreements) as JSON");
  cmd->add_option("--max-print", opt->max_print, "Print at most this many disagreements");
  cmd->footer("Exit status: 0 done (and tables agree), 1 tables disagree, 2 the file could not be "
              "read or written.\n\nExamples:\n  ehelf synth ./prog -o prog.synth && readelf -wF "
              "prog.synth\n  ehelf synth --compare /usr/lib/x86_64-linux-gnu/libc.so.6");
  cmd->callback([opt] {
    auto elf = ElfFile::open(opt->file);
    if (!elf) {
      fmt::print(stderr, "ehelf: {}\n", elf.error().to_string());
      return set_exit_code(2);
    }
    // The file's own table: its function starts help discovery; --compare checks against it.
    std::optional<UnwindTable> shipped;
    {
      LoadOptions lo;
      lo.debug_frame = false;
      auto m = load_module_cfi(opt->file, lo);
      auto table = m ? build_unwind_table(*m) : Result<UnwindTable>(m.error());
      if (table)
        shipped = std::move(*table);
      else if (opt->compare) {
        fmt::print(stderr, "ehelf: {}\n", table.error().to_string());
        return set_exit_code(2);
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto result = synth::synthesize(**elf, shipped ? &*shipped : nullptr);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!result) {
      fmt::print(stderr, "ehelf: {}\n", result.error().to_string());
      return set_exit_code(2);
    }
    uint64_t failed = 0;
    for (const synth::SynthFunction& f : result->functions)
      failed += !f.failure.empty();
    if (!opt->output.empty()) {
      auto image = encode_cfi_elf(result->table);
      if (!image) {
        fmt::print(stderr, "ehelf: {}: {}\n", opt->file, image.error().to_string());
        return set_exit_code(2);
      }
      std::ofstream out(opt->output, std::ios::binary);
      out.write(reinterpret_cast<const char*>(image->data()),
                static_cast<std::streamsize>(image->size()));
      if (!out.flush()) {
        fmt::print(stderr, "ehelf: {}: cannot write\n", opt->output);
        return set_exit_code(2);
      }
    }
    std::optional<synth::Comparison> cmp;
    if (opt->compare) {
      cmp = synth::compare_tables(*result, *shipped);
      if (!cmp->disagreements.empty()) set_exit_code(1);
    }
    const double mb = double(result->text_bytes) / 1e6;
    x86::Decoder decoder;
    auto instruction_text = [&](uint64_t a) {
      for (const Section& s : (*elf)->sections())
        if (a >= s.addr && a < s.addr + s.size && (s.flags & 4))
          if (auto d = (*elf)->section_data(s)) return decoder.format(d->subspan(a - s.addr), a);
      return std::string("?");
    };
    if (opt->json) {
      fmt::print("{{\"file\":{},\"functions\":{},\"functions_failed\":{},\"instructions\":{},"
                 "\"rows\":{},\"ranges\":{},\"conflicts\":{},\"text_bytes\":{},\"seconds\":{:.3f}",
                 json_string(opt->file), result->functions.size(), failed,
                 result->instructions.size(), result->table.row_count(),
                 result->table.ranges().size(), result->conflicts.size(), result->text_bytes,
                 seconds);
      fmt::print(",\"failures\":[");
      bool first = true;
      for (const synth::SynthFunction& f : result->functions)
        if (!f.failure.empty()) {
          fmt::print("{}{{\"function\":{},\"reason\":{}}}", first ? "" : ",", json_string(f.name),
                     json_string(f.failure));
          first = false;
        }
      fmt::print("]");
      if (cmp) {
        fmt::print(",\"compared\":{},\"agreeing\":{},\"uncovered\":{},\"categories\":{{",
                   cmp->instructions, cmp->agreeing, cmp->uncovered);
        first = true;
        for (const auto& [cat, n] : cmp->by_category) {
          fmt::print("{}{}:{}", first ? "" : ",", json_string(cat), n);
          first = false;
        }
        fmt::print("}},\"disagreements\":[");
        for (size_t i = 0; i < cmp->disagreements.size() && i < opt->max_print; ++i) {
          const synth::Disagreement& d = cmp->disagreements[i];
          fmt::print("{}{{\"function\":{},\"address\":\"{:#x}\",\"instruction\":{},"
                     "\"category\":{},\"synthesized\":{},\"shipped\":{}}}",
                     i ? "," : "", json_string(result->functions[d.function].name), d.address,
                     json_string(instruction_text(d.address)), json_string(d.category),
                     json_string(d.synthesized), json_string(d.shipped));
        }
        fmt::print("]");
      }
      fmt::print("}}\n");
      return;
    }
    for (const synth::Conflict& c : result->conflicts)
      fmt::print("conflict: {} at {:#x}: {} vs {}\n", c.function, c.address,
                 synth::describe(c.first), synth::describe(c.second));
    if (cmp) {
      for (size_t i = 0; i < cmp->disagreements.size() && i < opt->max_print; ++i) {
        const synth::Disagreement& d = cmp->disagreements[i];
        fmt::print("{} {:#x} {:<32} {}: synthesized {} | shipped {}\n",
                   result->functions[d.function].name, d.address, instruction_text(d.address),
                   d.category, d.synthesized, d.shipped);
      }
      for (const auto& [cat, n] : cmp->by_category)
        fmt::print("disagreements: {}: {}\n", cat, n);
      fmt::print("agreeing: {}/{} instructions ({:.3f}%), {} analysed instructions without a "
                 "shipped row\n",
                 cmp->agreeing, cmp->instructions,
                 cmp->instructions ? 100.0 * double(cmp->agreeing) / double(cmp->instructions)
                                   : 100.0,
                 cmp->uncovered);
    }
    fmt::print("functions: {} ({} not fully analysed), instructions: {}, rows: {}, conflicts: {}, "
               "time: {:.3f} s, .text: {:.2f} MB ({:.2f} MB/s)\n",
               result->functions.size(), failed, result->instructions.size(),
               result->table.row_count(), result->conflicts.size(), seconds, mb,
               seconds > 0 ? mb / seconds : 0.0);
  });
}

} // namespace ehelf::cli
