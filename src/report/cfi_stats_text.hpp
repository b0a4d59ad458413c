// Rendering CfiStats: the paper's Tables 3 and 4 and the histograms as text, or as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "report/cfi_stats.hpp"

namespace ehelf {

struct StatsReport {
  size_t top = 10;      // expressions listed
  double seconds = -1;  // wall time to show; < 0: none
  unsigned threads = 0; // shown with the time
};

// Plain aligned text: the paper's Tables 3 and 4, then the CFA rules, opcode and DW_OP
// histograms, common expressions, rows per FDE, file counts, errors.
std::string render_stats_text(const CfiStats& s, const StatsOptions& opt, const StatsReport& r);
// The same numbers as one JSON object.
nlohmann::json stats_to_json(const CfiStats& s, const StatsOptions& opt, const StatsReport& r);

} // namespace ehelf
