// libFuzzer target: arbitrary bytes as an ELF file to synthesize unwind tables for (function
// discovery, main from the entry point's call, PLT relocations, jump tables, .gcc_except_table's
// LSDAs, the per-function analysis), then encode them as .eh_frame, alone and patched into a copy
// of the file (--patch), both also leaving out the FDEs that cannot be encoded as -o and --patch
// do, and as .debug_frame with the file's build id; then again with the file's own table, if it
// reads, for its function starts and the LSDAs its FDEs name (as `ehelf synth --compare` does).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dwarf/cfi_encoder.hpp"
#include "dwarf/module_cfi.hpp"
#include "synth/synthesizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = ehelf::ElfFile::parse(std::span<const uint8_t>(data, size), "fuzz");
  if (!elf) return 0;
  auto result = ehelf::synth::synthesize(**elf);
  if (!result) return 0;
  (void)ehelf::encode_cfi_elf(result->table);
  // As `ehelf synth -o` encodes: the FDEs with a row DWARF cannot express left out.
  std::vector<ehelf::LeftOutFde> left_out;
  ehelf::CfiElfOptions leaving_out;
  leaving_out.left_out = &left_out;
  (void)ehelf::encode_cfi_elf(result->table, leaving_out);
  (void)ehelf::encode_cfi_patch(**elf, result->table, &left_out);
  ehelf::CfiElfOptions debug_file;
  debug_file.format = ehelf::CfiFormat::DebugFrame;
  debug_file.source = elf->get();
  (void)ehelf::encode_cfi_elf(result->table, debug_file);
  (void)ehelf::encode_cfi_patch(**elf, result->table);
  auto again = ehelf::ElfFile::parse(std::span<const uint8_t>(data, size), "fuzz");
  if (!again) return 0;
  auto module = ehelf::load_module_cfi(std::move(*again));
  if (!module) return 0;
  auto shipped = ehelf::build_unwind_table(*module);
  if (!shipped) return 0;
  (void)ehelf::synth::synthesize(**elf, &*shipped);
  return 0;
}
