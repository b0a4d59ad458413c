// The interpreted call-frame tables printed exactly as `readelf -wF` (GNU binutils 2.40) prints
// them, so readelf can serve as an oracle for our CFI reader.
//
// This is a re-enactment of readelf's own interpretation, quirks included (columns first
// referenced later print as "u", def_cfa_offset after an expression keeps "exp", offsets are
// truncated to int), driven by our decoded instruction stream. The unwind-table model is built
// by dwarf/cfa_interpreter, which follows DWARF rather than readelf.
#pragma once

#include <cstdio>
#include <string>

#include "dwarf/module_cfi.hpp"
#include "support/result.hpp"

namespace ehelf {

// Appends the text for every .eh_frame / .debug_frame section of `module` (in section-header
// order) to `out`, then those of `separate`, the module's separate debug file if one was found
// (readelf follows .gnu_debuglink). `display_name` is the file name as readelf would print it.
// On a malformed entry, `out` holds what readelf would have printed before it and the error is
// returned. With a `sink`, text is written there as it accumulates (and `out` keeps only the
// unwritten rest), so large files need no large buffer.
Status render_readelf_frames(const ModuleCfi& module, const ModuleCfi* separate,
                             const std::string& display_name, std::string& out,
                             std::FILE* sink = nullptr);

} // namespace ehelf
