// The output of `ehelf check`: the inconsistencies and the summary as text and as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "check/validator.hpp"

namespace ehelf::check {

// One paragraph per inconsistency, then the summary lines.
std::string format_text(const CheckResult& result);
nlohmann::json to_json(const CheckResult& result);

} // namespace ehelf::check
