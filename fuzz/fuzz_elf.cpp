// libFuzzer target: arbitrary bytes as an ELF file. Parses headers, sections (decompressing and
// relocating), symbols and notes, loads the CFI sections, builds the unwind table and renders the
// readelf text and JSON.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "dwarf/module_cfi.hpp"
#include "report/readelf_frames.hpp"
#include "report/table_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = ehelf::ElfFile::parse(std::span<const uint8_t>(data, size), "fuzz");
  if (!elf) return 0;
  (void)(*elf)->build_id_hex();
  (void)(*elf)->debug_link();
  for (const auto& s : (*elf)->symbols())
    (void)(*elf)->symbol_for(s.value);
  ehelf::LoadOptions options;
  options.separate_debug_file = false;
  auto m = ehelf::load_module_cfi(std::move(*elf), options);
  if (!m) return 0;
  auto table = ehelf::build_unwind_table(*m);
  if (table)
    for (const auto& r : table->ranges())
      (void)table->find(r.begin);
  std::string text;
  (void)ehelf::render_readelf_frames(*m->elf, nullptr, "fuzz", text);
  (void)ehelf::cfi_to_json(*m);
  return 0;
}
