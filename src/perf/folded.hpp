// Folded stacks: one line per distinct call stack, "comm;outermost;...;innermost COUNT", the
// format of Brendan Gregg's stackcollapse-perf.pl that flamegraph.pl, inferno and speedscope read.
//
// ---- Frame names (what add_folded writes for one StackFrame) ----
//   symbol known:                 "symbol"          ("symbol+0xOFF" with FoldOptions::addresses)
//   symbol unknown, module known: "[basename]"      ("[basename <0xPC>]" with addresses), e.g.
//                                 "[libc.so.6]"; a module already in brackets ("[vdso]") is kept
//                                 as it is. This is what stackcollapse-perf.pl does since it
//                                 learnt to "use module name instead, if known"; older versions
//                                 printed "[unknown]", which says less.
//   nothing known:                "0x<pc in hex>"   (stackcollapse-perf.pl: "[unknown]"; the pc
//                                 at least tells apart different unknown places)
// Names are made safe for the format: ';' (the frame separator) becomes ':', newlines are
// dropped, tabs become spaces and surrounding spaces are trimmed, so that read_folded gives back
// exactly what write_folded wrote. A name that ends up empty falls through to the next rule.
// Unlike stackcollapse-perf.pl, names are not otherwise "tidied" (it deletes '<' '>' and quotes
// and cuts at the first '('), since that mangles C++ templates and operators.
//
// The first frame is the command name with spaces turned into '_' (as stackcollapse-perf.pl
// does), "comm-PID" with include_pid, "comm-PID/TID" with include_tid; "[unknown]" when the
// sample has no command name.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "perf/sample_stack.hpp"
#include "support/result.hpp"

namespace ehelf::perf {

struct FoldOptions {
  bool include_pid = false;      // first frame "comm-PID"
  bool include_tid = false;      // first frame "comm-PID/TID" (the pid too, as stackcollapse-perf)
  bool weight_by_period = false; // each sample counts its period (e.g. cycles), not 1
  bool addresses = false;        // "symbol+0xOFF", "[module <0xPC>]": tells call sites apart
};

// Stack string -> count. The map keeps stacks sorted, the order stackcollapse-perf.pl prints.
using FoldedStacks = std::map<std::string, uint64_t>;

// One frame's name as the rules above write it.
std::string frame_name(const StackFrame& frame, bool addresses = false);
// A sample's stack line without its count: "comm;outermost;...;innermost".
std::string folded_stack(const SampleStack& sample, const FoldOptions& options);

// Adds one sample (1, or its period) to the count of its stack.
void add_folded(FoldedStacks& out, const SampleStack& sample, const FoldOptions& options);
// Adds `weight` to the count of a stack (one that stands for several samples).
void add_folded(FoldedStacks& out, const SampleStack& sample, const FoldOptions& options,
                uint64_t weight);
FoldedStacks fold(const std::vector<SampleStack>& samples, const FoldOptions& options);

// One "stack count\n" line per entry, in map order.
void write_folded(std::ostream& out, const FoldedStacks& stacks);

// Parses folded stacks as flamegraph.pl reads them: the count is the last whitespace-separated
// field of the line, the stack everything before it (without surrounding blanks). Blank lines are
// skipped, a trailing '\r' is ignored and lines with the same stack add up. Anything else that does
// not fit (no count, a count that is not a whole number, an empty stack or frame name) is an error
// naming `name` and the line number ("perf.folded: line 3: ..."); flamegraph.pl would skip such a
// line with a warning.
Result<FoldedStacks> read_folded(std::istream& in, std::string_view name);

} // namespace ehelf::perf
