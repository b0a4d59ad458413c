// What `ehelf synth` prints: the statistics, the conflicts and the disagreements of a synthesis
// (and its comparison with the file's own table), as text or as JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "elf/elf_file.hpp"
#include "synth/compare.hpp"
#include "synth/synthesizer.hpp"

namespace ehelf::synth {

struct ReportInput {
  std::string file;
  const ElfFile* elf = nullptr; // for the instructions' text
  const SynthResult* result = nullptr;
  const Comparison* comparison = nullptr; // null without --compare
  double seconds = 0;                     // the synthesis's wall time
  size_t max_print = 50;                  // disagreements listed at most
};

// Conflicts, then disagreements and the agreement summary (with a comparison), then one line of
// statistics (functions, instructions, rows, conflicts, time, MB/s).
std::string render_text(const ReportInput& in);

// The same as one JSON object: statistics, the functions not fully analysed with the reason, and
// with a comparison its counts, categories and first disagreements.
nlohmann::json to_json(const ReportInput& in);

} // namespace ehelf::synth
