// `ehelf dump FILE...`: the interpreted call-frame tables, as readelf -wF prints them, or JSON.
#include <cstdio>
#include <fmt/format.h>
#include <iostream>

#include "cli/commands.hpp"
#include "report/readelf_frames.hpp"
#include "report/table_json.hpp"

namespace ehelf::cli {

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
      LoadOptions lo;
      lo.separate_debug_file = false;
      auto m = load_module_cfi(file, lo);
      if (!m) {
        fmt::print(stderr, "ehelf: {}\n", m.error().to_string());
        set_exit_code(1);
        continue;
      }
      if (!m->has_tables() && !m->elf->find_section(".eh_frame") &&
          !m->elf->find_section(".debug_frame"))
        fmt::print(stderr, "ehelf: {}: no .eh_frame or .debug_frame section\n", file);
      if (opt->json) {
        auto j = cfi_to_json(*m);
        if (auto intact = m->elf->check_intact(); !intact) j = std::move(intact).error();
        if (!j) {
          fmt::print(stderr, "ehelf: {}\n", j.error().to_string());
          set_exit_code(1);
          continue;
        }
        std::cout << j->dump(1) << "\n";
        continue;
      }
      // Like readelf, also show the separate debug file's sections.
      std::optional<ModuleCfi> separate;
      if (std::string dbg = m->elf->find_debug_file(); !dbg.empty())
        if (auto sm = load_module_cfi(dbg, lo)) separate = std::move(*sm);
      std::string text;
      auto st = render_readelf_frames(*m, separate ? &*separate : nullptr, file, text, stdout);
      std::fwrite(text.data(), 1, text.size(), stdout);
      // A file truncated meanwhile was read as zeros past its new end: that, not what the zeros
      // made of the tables, is the error.
      if (auto intact = m->elf->check_intact(); !intact) st = std::move(intact);
      if (!st) {
        std::fflush(stdout);
        fmt::print(stderr, "ehelf: {}\n", st.error().to_string());
        set_exit_code(1);
      }
    }
  });
}

} // namespace ehelf::cli
