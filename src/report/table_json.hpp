// JSON form of the call-frame tables of a module: CIEs, FDEs and their interpreted rows.
#pragma once

#include <nlohmann/json.hpp>

#include "dwarf/module_cfi.hpp"

namespace ehelf {

// Rules as short strings, the same spelling the text dump uses ("c-8", "rsp+8", "exp").
std::string cfa_rule_text(const CfaRule& rule);
std::string register_rule_text(const RegisterRule& rule);

// {"file":..., "sections":[{"name":".eh_frame","entries":[{"type":"FDE","offset":..,"pc_begin":..,
//   "pc_end":..,"cie":..,"rows":[{"loc":..,"cfa":"rsp+8","registers":{"rip":"c-8"}}]}]}]}
// Rows are the model's (after interpretation); expressions are given in readelf spelling.
Result<nlohmann::json> cfi_to_json(const ModuleCfi& module);

} // namespace ehelf
