// Text and JSON forms of sample stacks: the layout of
// `perf script -F comm,pid,tid,time,ip,sym,dso --no-inline` (so the two can be diffed), and one
// JSON object per sample.
#pragma once

#include <ostream>

#include "perf/sample_stack.hpp"

namespace ehelf::perf {

struct ScriptOptions {
  bool offsets = false; // sym+0xOFF, as perf script's symoff field
  bool stop = false;    // a last line per sample saying why the walk ended
};

void write_script(std::ostream& out, const SampleStack& s, const ScriptOptions& o = {});

// {"comm":..,"pid":..,"tid":..,"time":..,"period":..,"stop":..,"frames":[{"pc":..,"symbol":..,
// "offset":..,"module":..}]} on one line.
void write_json_line(std::ostream& out, const SampleStack& s);

} // namespace ehelf::perf
