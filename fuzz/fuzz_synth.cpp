// libFuzzer target: arbitrary bytes as an ELF file to synthesize unwind tables for (function
// discovery, PLT relocations, jump tables, .gcc_except_table's LSDAs, the per-function analysis),
// then encode them as .eh_frame, alone and patched into a copy of the file (--patch).
#include <cstddef>
#include <cstdint>
#include <span>

#include "dwarf/cfi_encoder.hpp"
#include "synth/synthesizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = ehelf::ElfFile::parse(std::span<const uint8_t>(data, size), "fuzz");
  if (!elf) return 0;
  auto result = ehelf::synth::synthesize(**elf);
  if (!result) return 0;
  (void)ehelf::encode_cfi_elf(result->table);
  (void)ehelf::encode_cfi_patch(**elf, result->table);
  return 0;
}
