// `ehelf dump FILE...`: the interpreted call-frame tables, as readelf -wF prints them, or JSON.
#include <cstdio>
#include <fmt/format.h>
#include <iostream>

#include "cli/commands.hpp"
#include "report/readelf_frames.hpp"
#include "report/table_json.hpp"

namespace ehelf::cli {

namespace {

// At most this many of readelf's complaints per file: a hostile file can make thousands.
constexpr size_t kMaxWarnings = 10;

void report_warnings(const ReadelfWarnings& warnings) {
  for (size_t i = 0; i < warnings.kept.size() && i < kMaxWarnings; ++i)
    fmt::print(stderr, "ehelf: warning: {}\n", warnings.kept[i].to_string());
  if (warnings.count > kMaxWarnings)
    fmt::print(stderr, "ehelf: warning: {}: {} more\n", warnings.kept.front().file,
               warnings.count - kMaxWarnings);
}

// The model's tables as JSON; malformed tables are an error here (there is no readelf to match).
void dump_json(const std::string& file) {
  LoadOptions lo;
  lo.separate_debug_file = false;
  auto m = load_module_cfi(file, lo);
  if (!m) {
    fmt::print(stderr, "ehelf: {}\n", m.error().to_string());
    set_exit_code(1);
    return;
  }
  if (!m->has_tables() && !m->elf->find_section(".eh_frame") &&
      !m->elf->find_section(".debug_frame"))
    fmt::print(stderr, "ehelf: {}: no .eh_frame or .debug_frame section\n", file);
  auto j = cfi_to_json(*m);
  if (auto intact = m->elf->check_intact(); !intact) j = std::move(intact).error();
  if (!j) {
    fmt::print(stderr, "ehelf: {}\n", j.error().to_string());
    set_exit_code(1);
    return;
  }
  std::cout << j->dump(1) << "\n";
}

} // namespace

void register_dump(CLI::App& app) {
  struct Options {
    std::vector<std::string> files;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("dump", "Print the interpreted call-frame tables of ELF files");
  cmd->footer(
      "Examples:\n  ehelf dump /usr/lib/x86_64-linux-gnu/libc.so.6     # as readelf -wF prints it\n"
      "  ehelf dump --json ./prog | jq '.fdes | length'");
  cmd->add_option("files", opt->files, "ELF files")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--json", opt->json, "Print JSON instead of readelf -wF text");
  cmd->callback([opt] {
    for (const auto& file : opt->files) {
      if (opt->json) {
        dump_json(file);
        continue;
      }
      // Header tables readelf cannot read leave it without sections or segments, not failing.
      auto elf = ElfFile::open(file, ElfFile::HeaderFaults::Tolerate);
      if (!elf) {
        fmt::print(stderr, "ehelf: {}\n", elf.error().to_string());
        set_exit_code(1);
        continue;
      }
      // Like readelf, also show the separate debug file's sections. readelf looks for it only
      // through these sections (not through a PT_NOTE when the section headers are lost).
      std::unique_ptr<ElfFile> separate;
      bool has_links =
          (*elf)->find_section(".note.gnu.build-id") || (*elf)->find_section(".gnu_debuglink");
      if (std::string dbg = has_links ? (*elf)->find_debug_file() : ""; !dbg.empty())
        if (auto s = ElfFile::open(dbg)) separate = std::move(*s);
      std::string text;
      // readelf names each file it reads when given several.
      if (opt->files.size() > 1) text = fmt::format("\nFile: {}\n", file);
      auto outcome = render_readelf_frames(**elf, separate.get(), file, text, stdout);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      const bool bad_headers = (*elf)->header_error().has_value();
      if (bad_headers)
        fmt::print(stderr, "ehelf: warning: {}\n", (*elf)->header_error()->to_string());
      else if (outcome.frame_sections == 0)
        fmt::print(stderr, "ehelf: {}: no .eh_frame or .debug_frame section\n", file);
      // A file truncated meanwhile was read as zeros past its new end: that, not what the zeros
      // made of the tables, is the error.
      if (auto intact = (*elf)->check_intact(); !intact) {
        fmt::print(stderr, "ehelf: {}\n", intact.error().to_string());
        set_exit_code(1);
        continue;
      }
      // A malformed table still prints as readelf prints it, its complaints on stderr as ours
      // (file, section, offset); but hostile input is an error for ehelf, so any complaint makes
      // the exit status 1 where readelf's is 0.
      report_warnings(outcome.warnings);
      if (outcome.failed || outcome.warnings.count > 0 || bad_headers) set_exit_code(1);
    }
  });
}

} // namespace ehelf::cli
