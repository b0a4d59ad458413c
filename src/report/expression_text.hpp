// readelf's spelling of a DWARF expression, as `readelf -wf` prints it in CFI.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "model/expression.hpp"

namespace ehelf {

// Ops separated by "; ", e.g. "DW_OP_breg7 (rsp): 8; DW_OP_deref".
std::string expression_text(const Expression& e);

// The same from raw bytes, read as leniently as readelf's decode_location_expression reads them
// (operands cut by the end read as far as they go, unknown opcodes named and stopped at), so
// any bytes print as readelf prints them. `address` is the SVMA of bytes[0] (for
// DW_OP_GNU_encoded_addr's pc-relative form).
std::string expression_text(std::span<const uint8_t> bytes, unsigned address_size,
                            uint64_t address = 0);

} // namespace ehelf
