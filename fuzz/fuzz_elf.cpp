// libFuzzer target: arbitrary bytes as an ELF file, or as an ar archive of them (`ehelf dump
// lib.a`). Parses headers, sections (decompressing and relocating), symbols, PLT entries' names
// and notes, loads the CFI sections, builds the unwind table and renders the readelf text and
// JSON.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dwarf/module_cfi.hpp"
#include "elf/archive.hpp"
#include "elf/needed_libraries.hpp"
#include "report/readelf_frames.hpp"
#include "report/table_json.hpp"

namespace {

void fuzz_elf(std::span<const uint8_t> bytes) {
  auto elf = ehelf::ElfFile::parse(bytes, "fuzz");
  if (!elf) return;
  (void)(*elf)->build_id_hex();
  (void)(*elf)->debug_link();
  (void)ehelf::dynamic_needs(**elf);
  for (const auto& s : (*elf)->symbols())
    (void)(*elf)->symbol_for(s.value);
  for (const auto& s : (*elf)->sections())
    if (s.name.starts_with(".plt"))
      for (uint64_t at = s.addr; at - s.addr < std::min<uint64_t>(s.size, 4096); at += 8)
        (void)(*elf)->plt_symbol_for(at);
  ehelf::LoadOptions options;
  options.separate_debug_file = false;
  auto m = ehelf::load_module_cfi(std::move(*elf), options);
  if (!m) return;
  auto table = ehelf::build_unwind_table(*m);
  if (table)
    for (const auto& r : table->ranges())
      (void)table->find(r.begin);
  std::string text;
  (void)ehelf::render_readelf_frames(*m->elf, nullptr, "fuzz", text);
  (void)ehelf::cfi_to_json(*m);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  if (!ehelf::is_archive(bytes)) {
    fuzz_elf(bytes);
    return 0;
  }
  // Each member on its own heap block, so that a read past its end is caught.
  for (const ehelf::ArchiveMember& member : ehelf::read_archive(bytes).members)
    fuzz_elf(std::vector<uint8_t>(member.bytes.begin(), member.bytes.end()));
  return 0;
}
