// `ehelf synth FILE -o OUT` and `ehelf synth --compare FILE`: unwind tables recomputed from the
// machine code (synth/), written as an ELF holding .eh_frame/.eh_frame_hdr or .debug_frame and
// the file's build id (a separate debug file for it), or checked against
// the file's own tables at every analysed instruction.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "cli/commands.hpp"
#include "dwarf/cfi_encoder.hpp"
#include "dwarf/module_cfi.hpp"
#include "support/output_file.hpp"
#include "synth/compare.hpp"
#include "synth/report.hpp"

namespace ehelf::cli {

void register_synth(CLI::App& app) {
  struct Options {
    std::string file;
    std::string output;
    std::string reference;
    std::string patch;
    bool compare = false;
    bool debug_frame = false;
    bool json = false;
    size_t max_print = 50;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "synth", "Recompute the unwind table of an x86_64 ELF from its machine code; write it as an "
               "ELF holding .eh_frame and .eh_frame_hdr (or .debug_frame), or compare it with "
               "the file's own");
  cmd->add_option("file", opt->file, "ELF file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opt->output,
                  "Write the synthesized tables to this ELF file, with FILE's build id: a "
                  "separate debug file for FILE (install it as DEBUGDIR/.build-id/xx/yyyy.debug)");
  cmd->add_flag("--debug-frame", opt->debug_frame,
                "Write the -o tables as .debug_frame instead of .eh_frame and .eh_frame_hdr");
  cmd->add_flag("--compare", opt->compare,
                "Compare with the file's own tables at every analysed instruction");
  cmd->add_option("--patch", opt->patch,
                  "Write a runnable copy of FILE whose unwind tables are the synthesized ones (a "
                  "new loaded segment with PT_GNU_EH_FRAME): C++ exceptions and backtrace() work "
                  "in a binary stripped of its tables");
  cmd->add_option("--compare-with", opt->reference,
                  "Compare with this file's tables instead (the same program before its tables "
                  "were stripped); the synthesis compared is the one -o and --patch write")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", opt->json, "Print the statistics (and disagreements) as JSON");
  cmd->add_option("--max-print", opt->max_print, "Print at most this many disagreements");
  cmd->footer(
      "Exit status: 0 done (and tables agree), 1 tables disagree, 2 the file could not be "
      "read or written.\n\nExamples:\n  ehelf synth ./prog -o prog.synth && readelf -wF "
      "prog.synth\n  ehelf synth ./stripped --debug-frame -o dbg/.build-id/xx/yyyy.debug  # "
      "xx/yyyy: "
      "its build id\n  ehelf stack -p PID --debug-dir dbg   # (gdb: set debug-file-directory "
      "dbg:/usr/lib/debug)\n  ehelf synth --compare /usr/lib/x86_64-linux-gnu/libc.so.6");
  cmd->callback([opt] {
    auto elf = ElfFile::open(opt->file);
    if (!elf) {
      return report_error(elf.error(), 2);
    }
    if (!opt->reference.empty()) opt->compare = true;
    // The file's own table: its function starts help discovery, whatever else is asked (what
    // -o and --patch write is the synthesis --compare and --compare-with measure). --compare
    // checks against it; --compare-with against the reference's instead.
    auto load_table = [](const std::string& path) -> Result<UnwindTable> {
      LoadOptions lo;
      lo.debug_frame = false;
      auto m = load_module_cfi(path, lo);
      return m ? build_unwind_table(*m) : Result<UnwindTable>(m.error());
    };
    auto own = load_table(opt->file);
    std::optional<UnwindTable> reference;
    if (!opt->reference.empty()) {
      auto table = load_table(opt->reference);
      if (!table) {
        return report_error(table.error(), 2);
      }
      reference = std::move(*table);
    } else if (opt->compare && !own) {
      return report_error(own.error(), 2);
    }
    const UnwindTable* discovery = own ? &*own : nullptr;
    const UnwindTable* shipped = reference ? &*reference : discovery;
    const auto t0 = std::chrono::steady_clock::now();
    auto result = synth::synthesize(**elf, discovery);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!result) {
      return report_error(result.error(), 2);
    }
    // A function with a row DWARF cannot express (a save at an offset not a multiple of 8, in
    // code that is no compiler's) is left out of what is written, once each, with a warning.
    std::vector<LeftOutFde> left_out;
    std::set<uint64_t> warned;
    auto warn_left_out = [&] {
      for (const LeftOutFde& l : left_out)
        if (warned.insert(l.begin).second) {
          const synth::SynthFunction* f = synth::function_at(*result, l.begin);
          fmt::print(stderr, "ehelf: warning: {}: {}: {}; its rows are left out\n", opt->file,
                     f ? f->name : fmt::format("{:#x}", l.begin), l.why.message);
        }
      left_out.clear();
    };
    if (!opt->output.empty()) {
      CfiElfOptions eo;
      eo.format = opt->debug_frame ? CfiFormat::DebugFrame : CfiFormat::EhFrame;
      eo.source = elf->get();
      eo.left_out = &left_out;
      auto image = encode_cfi_elf(result->table, eo);
      if (!image) {
        fmt::print(stderr, "ehelf: {}: {}\n", opt->file, image.error().to_string());
        return set_exit_code(2);
      }
      warn_left_out();
      const std::string_view bytes(reinterpret_cast<const char*>(image->data()), image->size());
      if (Status s = write_output_file(opt->output, bytes); !s) {
        return report_error(s.error(), 2);
      }
    }
    if (!opt->patch.empty()) {
      auto patched = encode_cfi_patch(**elf, result->table, &left_out);
      warn_left_out();
      if (!patched) {
        fmt::print(stderr, "ehelf: {}: {}\n", opt->patch, patched.error().to_string());
        return set_exit_code(2);
      }
      // A program meant to run: executable, but never FILE's setuid or setgid bits.
      const std::string_view bytes(reinterpret_cast<const char*>(patched->data()), patched->size());
      if (Status s = write_output_file(opt->patch, bytes, {.mode = 0777}); !s) {
        return report_error(s.error(), 2);
      }
    }
    std::optional<synth::Comparison> cmp;
    if (opt->compare) {
      cmp = synth::compare_tables(*result, *shipped, elf->get());
      if (!cmp->disagreements.empty()) set_exit_code(1);
    }
    synth::ReportInput report{opt->file, elf->get(),    &*result, cmp ? &*cmp : nullptr,
                              seconds,   opt->max_print};
    if (opt->json) {
      // Names come from binaries: invalid UTF-8 is replaced rather than thrown on.
      fmt::print("{}\n", synth::to_json(report).dump(-1, ' ', false,
                                                     nlohmann::json::error_handler_t::replace));
      return;
    }
    const std::string text = synth::render_text(report);
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

} // namespace ehelf::cli
