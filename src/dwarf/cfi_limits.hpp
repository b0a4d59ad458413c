// CfiLimits: what one module's call-frame tables may cost to read. A table is refused past
// these (one line naming the file, section and offset) instead of taking the machine's memory:
// a zlib-compressed .debug_frame of 20 KB can hold one FDE of tens of millions of rows.
//
// Chosen from the largest tables on this machine (ehelf stats and CfiLimits.LargestLibraries-
// AreReadWhole; per FDE, readelf --debug-dump=frames: the instructions of one program, and its
// rows, one more than its advance_loc/set_loc):
//                  FDEs     per FDE at most              rows      distinct rows
//   libLLVM-15.so  98,256   1,096 instructions, 544 rows 887,782   1,001
//   gdb            20,333     241 instructions, 112 rows 141,749     435
//   python3.11     10,221     211 instructions,  88 rows  61,382     451
//   chromium        8,852   1,024 instructions, 510 rows  60,651     316
// so the limits leave a margin of about 100 per FDE, 4.5 on the rows of a module and 260 on its
// distinct rows over libLLVM-15. At the limits a table holds ~160 MB (32 bytes a range, ~130 a
// distinct row; up to twice that while its vectors grow).
#pragma once

#include <cstdint>

namespace ehelf::cfi_limits {

// Instructions in one CIE or FDE program; also what one on-demand row lookup may run (CIE and
// FDE together). Bounds the time one lookup takes.
inline constexpr uint64_t kMaxInstructionsPerProgram = 100'000;

// Rows one FDE may make (each needs one advance_loc or set_loc, so also bounded by the above).
inline constexpr uint64_t kMaxRowsPerFde = 65'536;

// Rows all FDEs of one module may make together (.eh_frame and .debug_frame), before
// deduplication: a table holds 32 bytes per row and each distinct row about 100 more.
inline constexpr uint64_t kMaxRowsPerModule = 4'000'000;

// Distinct rows of one module: real tables have hundreds to a thousand, a hostile program can
// make every row distinct.
inline constexpr uint64_t kMaxDistinctRowsPerModule = 262'144;

} // namespace ehelf::cfi_limits
