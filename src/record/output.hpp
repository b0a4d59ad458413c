// What `ehelf record` writes: the profile as folded stacks, an interactive flame graph, a pprof
// profile or perf script's per-sample layout, chosen by -f or by the output file's extension.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "perf/folded.hpp"
#include "perf/sample_stack.hpp"
#include "record/recorder.hpp"
#include "support/output_file.hpp"
#include "support/result.hpp"

namespace ehelf::record {

enum class ProfileFormat { Folded, Svg, Pprof, Script };

// `format` ("folded", "svg", "pprof", "script"), else by the extension of `path`, in any case:
// .svg, .pb.gz / .pprof / .pb, .folded / .txt; an error for any other (or none).
Result<ProfileFormat> profile_format(std::string_view format, std::string_view path);

struct OutputOptions {
  perf::FoldOptions fold; // folded and svg: roots per process/thread, weights
  std::string title;      // svg
  bool inverted = false;  // svg: an icicle graph (FlameGraphOptions::inverted)
  std::string event = "cpu-clock";
  uint64_t frequency = 0, period = 0; // how the recording sampled (pprof's period)
  int64_t start_nanos = 0;            // wall-clock start (pprof's time_nanos)
};

// Writes the profile into `file` and commits it. `stacks` are the recording's named stacks
// (Profile::named). The file is created before the recording starts: a recording cannot be made
// again, so a path that cannot be written is said first.
// `path` with an interval's number before its extension: prof.pb.gz -> prof.0001.pb.gz,
// ehelf.svg -> ehelf.0001.svg, out -> out.0001.
std::string interval_path(std::string_view path, unsigned index);

Status write_profile(Recording& recording, const std::vector<perf::CountedStack>& stacks,
                     ProfileFormat format, OutputFile& file, const OutputOptions& options);

} // namespace ehelf::record
