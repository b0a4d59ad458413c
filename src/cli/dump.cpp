// `ehelf dump FILE...`: the interpreted call-frame tables, as readelf -wF prints them, or JSON.
#include <cstdio>
#include <fmt/format.h>
#include <iostream>

#include "cli/commands.hpp"
#include "elf/archive.hpp"
#include "elf/mapped_file.hpp"
#include "report/readelf_frames.hpp"
#include "report/table_json.hpp"
#include "support/safe_text.hpp"

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
    report_error(m.error());
    return;
  }
  if (!m->has_tables() && !m->elf->find_section(".eh_frame") &&
      !m->elf->find_section(".debug_frame"))
    fmt::print(stderr, "ehelf: {}: no .eh_frame or .debug_frame section\n", file);
  auto j = cfi_to_json(*m);
  if (auto intact = m->elf->check_intact(); !intact) j = std::move(intact).error();
  if (!j) {
    report_error(j.error());
    return;
  }
  std::cout << j->dump(1) << "\n";
}

// One ELF file's tables as readelf -wF prints them, after `header` (readelf's "File:" line).
// `say_none`: say on stderr when it has no tables (not for an archive's members: data-only
// objects are common there).
void dump_text(const ElfFile& elf, const std::string& name, std::string header,
               bool say_none = true) {
  // Like readelf, also show the separate debug file's sections. readelf looks for it only
  // through these sections (not through a PT_NOTE when the section headers are lost).
  std::unique_ptr<ElfFile> separate;
  bool has_links = elf.find_section(".note.gnu.build-id") || elf.find_section(".gnu_debuglink");
  if (std::string dbg = has_links ? elf.find_debug_file() : ""; !dbg.empty())
    if (auto s = ElfFile::open(dbg)) separate = std::move(*s);
  std::string text = std::move(header);
  auto outcome = render_readelf_frames(elf, separate.get(), name, text, stdout);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  const bool bad_headers = elf.header_error().has_value();
  if (bad_headers)
    fmt::print(stderr, "ehelf: warning: {}\n", elf.header_error()->to_string());
  else if (outcome.frame_sections == 0 && say_none)
    fmt::print(stderr, "ehelf: {}: no .eh_frame or .debug_frame section\n", name);
  // A file truncated meanwhile was read as zeros past its new end: that, not what the zeros
  // made of the tables, is the error.
  if (auto intact = elf.check_intact(); !intact) {
    report_error(intact.error());
    return;
  }
  // A malformed table still prints as readelf prints it, its complaints on stderr as ours
  // (file, section, offset); but hostile input is an error for ehelf, so any complaint makes
  // the exit status 1 where readelf's is 0.
  report_warnings(outcome.warnings);
  if (outcome.failed || outcome.warnings.count > 0 || bad_headers) set_exit_code(1);
}

// A static library: each member under "File: ARCHIVE(MEMBER)", as readelf prints it even for
// one archive; a member that is not an ELF file is said on stderr after its "File:" line, as
// readelf does. Damage to the archive itself ends it there, with one line (readelf's own
// complaints about broken archives are not re-enacted).
void dump_archive(const MappedFile& archive) {
  const ArchiveListing listing = read_archive(archive.bytes());
  for (const ArchiveMember& m : listing.members) {
    const std::string name = fmt::format("{}({})", archive.path(), m.name);
    // Errors quote the member's name, which the file chose: kept to one line.
    auto elf = ElfFile::parse(m.bytes, message_safe(name), ElfFile::HeaderFaults::Tolerate);
    if (!elf) {
      fmt::print(stdout, "\nFile: {}\n", name);
      std::fflush(stdout); // before the error line, as readelf's order
      report_error(elf.error());
      continue;
    }
    dump_text(**elf, name, fmt::format("\nFile: {}\n", name), false);
  }
  if (listing.damage) {
    report_error(Error(*listing.damage).in_file(archive.path()));
  }
  if (auto intact = archive.check_intact(); !intact) {
    report_error(intact.error());
  }
}

} // namespace

void register_dump(CLI::App& app) {
  struct Options {
    std::vector<std::string> files;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "dump", "Print the interpreted call-frame tables of ELF files and static libraries");
  cmd->footer(
      "Examples:\n  ehelf dump /usr/lib/x86_64-linux-gnu/libc.so.6     # as readelf -wF prints it\n"
      "  ehelf dump --json ./prog | jq '.fdes | length'\n"
      "  ehelf dump /usr/lib/x86_64-linux-gnu/libc_nonshared.a   # each member, as readelf");
  cmd->add_option("files", opt->files, "ELF files or ar archives of them")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", opt->json, "Print JSON instead of readelf -wF text");
  cmd->callback([opt] {
    for (const auto& file : opt->files) {
      auto mapped = MappedFile::open(file);
      if (!mapped) {
        report_error(mapped.error());
        continue;
      }
      if (opt->json && (is_archive((*mapped)->bytes()) || is_thin_archive((*mapped)->bytes()))) {
        fmt::print(stderr,
                   "ehelf: {}: an archive: --json reads ELF files (its members: ar x {} first)\n",
                   file, file);
        set_exit_code(1);
      } else if (opt->json) {
        dump_json(file);
      } else if (is_thin_archive((*mapped)->bytes())) {
        fmt::print(stderr,
                   "ehelf: {}: a thin archive: its members are files of their own (dump those)\n",
                   file);
        set_exit_code(1);
      } else if (is_archive((*mapped)->bytes())) {
        dump_archive(**mapped);
      } else {
        // Header tables readelf cannot read leave it without sections or segments, not failing.
        auto elf = ElfFile::open(file, ElfFile::HeaderFaults::Tolerate);
        if (!elf) {
          report_error(elf.error());
          continue;
        }
        // readelf names each file it reads when given several.
        dump_text(**elf, file, opt->files.size() > 1 ? fmt::format("\nFile: {}\n", file) : "");
      }
    }
  });
}

} // namespace ehelf::cli
