// readelf's spelling of a DWARF expression, as `readelf -wf` prints it in CFI.
#pragma once

#include <string>

#include "model/expression.hpp"

namespace ehelf {

// Ops separated by "; ", e.g. "DW_OP_breg7 (rsp): 8; DW_OP_deref".
std::string expression_text(const Expression& e);

} // namespace ehelf
