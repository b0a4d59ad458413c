// The synthesizer's first phase: what a file says of its functions before any of its code is
// analysed. Its code sections; the function starts its symbols, entry point, constructor tables
// and shipped FDEs name (with the ends they state); which of them never return (by name, also
// through the PLT); the code addresses it stores as values. The analyses (synthesizer.cpp) then
// add the starts they find (call targets, address-taken code, prologues) to these.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"

namespace ehelf::synth {

struct CodeSection {
  uint64_t begin, end;
  std::span<const uint8_t> bytes;
};

struct Discovery {
  const UnwindTable* shipped = nullptr; // the file's own table, for its FDEs' extents
  std::vector<CodeSection> code;
  uint64_t text_bytes = 0;               // of code
  std::map<uint64_t, std::string> names; // function starts -> name
  std::set<uint64_t> cold;               // starts of split-off cold parts
  // Starts known only from the shipped table's FDEs. In a stripped file these include the cold
  // parts of split functions, entered by jumps (to their start or into their middle) with the
  // parent's frame in place: such a part, never called, is analysed from the states of the jumps
  // that reach it, each target with the first state found for it.
  std::set<uint64_t> weak;
  std::map<uint64_t, uint64_t> known_ends; // start -> end from symbol sizes and FDEs
  std::set<uint64_t> noreturn;             // starts of functions that never return
  // Code addresses the file stores or computes as values (relative relocations, rip-relative
  // `lea`, `mov $imm`): function pointers, mostly, but also labels (computed goto), so each
  // becomes a start only if no analysis has reached it once the other starts are analysed.
  std::set<uint64_t> address_taken;
  // Every code address found so (kept): inside a function, the labels of its computed jumps
  // (GNU C's `goto *p` in interpreters' dispatch loops, tables of labels in assembly).
  std::set<uint64_t> code_pointers;
  bool executable_not_pie = false; // ET_EXEC: code at fixed addresses, `mov $fn,%edi` possible
  // A library's calls to its own exported functions go through its PLT: definition -> entries,
  // and the entries.
  std::unordered_map<uint64_t, std::vector<uint64_t>> plt_to_local;
  std::set<uint64_t> plt_local_entries;
  // glibc's error() and error_at_line(), which exit when their first argument is not 0 (the
  // compiler knows it and puts nothing after such a call): their PLT entries and definitions.
  std::set<uint64_t> exit_if_status;
  uint64_t entry = 0;

  const CodeSection* section_of(uint64_t a) const;
  // A function start at `a` (in code), named `name` (or fn_<hex>) unless it has a name.
  void add_start(uint64_t a, std::string name);
  // Where the function or part starting at `start` ends at most: its section's end, the next
  // start, the end the file states.
  uint64_t extent_end(uint64_t start) const;
  // The end the file states (a symbol's size, a shipped FDE) for a function or part starting at
  // `a`, else `a`: a stripped file's extents reach past the function, over other functions'
  // code whose addresses are taken too.
  uint64_t stated_end(uint64_t a) const;
  // The start of the function whose extent, as the file states it (a symbol's size, a shipped
  // FDE), holds `a` past its start (the body of another function, analysed as part of it), or 0.
  uint64_t known_function_holding(uint64_t a) const;
  // The start of the .cold part holding `a` (landing pads jump into their middle), or 0.
  uint64_t cold_part_of(uint64_t a) const;
};

// What `elf` says (with `shipped`, its own table, if any).
Discovery discover(const ElfFile& elf, const UnwindTable* shipped);

} // namespace ehelf::synth
