// Static validation: a synthesized frame state against a module's own table at every analysed
// instruction (CFA, return address, each callee-saved column), with equivalent forms treated as
// equal (rsp+N against rbp+M where both hold; "same value" against no rule; a save rule kept
// after the register was restored from that slot).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"
#include "synth/synthesizer.hpp"

namespace ehelf::synth {

struct Disagreement {
  uint64_t address = 0;
  uint32_t function = 0;   // into SynthResult::functions
  std::string category;    // "cfa", "return address", "rbx", ..., "no shipped row"
  std::string synthesized; // our row
  std::string shipped;     // the module's row
};

struct Comparison {
  uint64_t instructions = 0; // analysed instructions compared
  uint64_t uncovered = 0;    // analysed instructions the shipped table has no row for
  uint64_t agreeing = 0;
  // Coverage: bytes of code the shipped table has rows for, how many of them no analysis reached
  // (the PLT, alignment padding, functions not found, paths not followed), and the instructions
  // there other than the PLT's and padding (nop, int3).
  uint64_t shipped_bytes = 0, missed_bytes = 0, missed_instructions = 0;
  std::vector<Disagreement> disagreements; // one per disagreeing instruction (first category)
  std::map<std::string, uint64_t> by_category;
};

// `shipped` is the module's own table (build_unwind_table); `elf`, if given, the synthesized file,
// whose code not analysed is decoded for missed_instructions.
Comparison compare_tables(const SynthResult& synthesized, const UnwindTable& shipped,
                          const ElfFile* elf = nullptr);

// The row of `table` at `pc` as text ("CFA=rsp+16 rbx@-16 ra@-8"), or "none".
std::string shipped_row_text(const UnwindTable& table, uint64_t pc);

} // namespace ehelf::synth
