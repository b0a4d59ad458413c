// The compile report: the paper's Table 2 columns per file (sizes of the tables and of the
// eh_elf, growth, ranges, bodies, time) as an aligned text table or JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compile_module.hpp"

namespace ehelf {

// The table, with a total line when there are several files.
std::string render_report_table(const std::vector<CompileReport>& reports);
nlohmann::json report_json(const CompileReport& r);

} // namespace ehelf
