#include "record/output.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "perf/flamegraph.hpp"
#include "perf/pprof.hpp"
#include "perf/script_output.hpp"

namespace ehelf::record {

Result<ProfileFormat> profile_format(std::string_view format, std::string_view path) {
  if (format == "folded") return ProfileFormat::Folded;
  if (format == "svg") return ProfileFormat::Svg;
  if (format == "pprof") return ProfileFormat::Pprof;
  if (format == "script") return ProfileFormat::Script;
  if (!format.empty())
    return Error::plain(fmt::format("unknown format '{}' (folded, svg, pprof, script)", format));
  // The file's name, not a directory's, and in any case (x.SVG, PROF.PB.GZ).
  std::string name(path.substr(path.rfind('/') + 1));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.ends_with(".svg")) return ProfileFormat::Svg;
  if (name.ends_with(".pb.gz") || name.ends_with(".pprof") || name.ends_with(".pb"))
    return ProfileFormat::Pprof;
  if (name.ends_with(".folded") || name.ends_with(".txt")) return ProfileFormat::Folded;
  // Anything else would be written in a format its name does not say (prof.json, x.html).
  return Error::plain(fmt::format("-o {}: no format has this extension (.svg, .folded, .txt, "
                                  ".pb.gz, .pprof, .pb); or say it with -f folded|svg|pprof|script",
                                  path));
}

std::string interval_path(std::string_view path, unsigned index) {
  const size_t slash = path.rfind('/');
  const size_t name = slash == std::string_view::npos ? 0 : slash + 1;
  size_t ext = path.size();
  if (path.size() - name > 6 && path.ends_with(".pb.gz"))
    ext = path.size() - 6;
  else if (const size_t dot = path.rfind('.'); dot != std::string_view::npos && dot > name)
    ext = dot;
  return fmt::format("{}.{:04}{}", path.substr(0, ext), index, path.substr(ext));
}

Status write_profile(Recording& recording, const std::vector<perf::CountedStack>& stacks,
                     ProfileFormat format, OutputFile& file, const OutputOptions& o) {
  std::ostream& out = file.stream();
  if (format == ProfileFormat::Pprof) {
    perf::PprofOptions po;
    const bool time_event = o.event == "cpu-clock" || o.event == "task-clock";
    po.value_type = time_event ? "cpu" : o.event;
    po.value_unit = time_event ? "nanoseconds" : "count";
    po.period = static_cast<int64_t>(o.period                    ? o.period
                                     : time_event && o.frequency ? 1000000000 / o.frequency
                                                                 : 0);
    po.time_nanos = o.start_nanos;
    po.duration_nanos = static_cast<int64_t>(recording.seconds * 1e9);
    // The running kernel's image, as perf describes it (its file offset is its start).
    if (auto [start, end] = recording.unwinder->kernel_text(); end > start)
      po.kernel = {"[kernel.kallsyms]", start, end, start, perf::KernelSymbols::running_build_id()};
    if (Status s = perf::write_pprof(out, stacks, po); !s) return s;
    return file.commit();
  }
  if (format == ProfileFormat::Script) {
    for (const perf::SampleStack& s : recording.profile.timeline(*recording.unwinder))
      perf::write_script(out, s);
  } else {
    perf::FoldedStacks folded;
    for (const perf::CountedStack& c : stacks)
      folded[perf::folded_stack(c.stack, o.fold)] += o.fold.weight_by_period ? c.period : c.samples;
    if (format == ProfileFormat::Folded) {
      perf::write_folded(out, folded);
    } else {
      perf::FlameGraphOptions fg;
      fg.title = o.title;
      fg.inverted = o.inverted;
      if (o.fold.weight_by_period) fg.count_name = o.event == "cpu-clock" ? "ns" : "events";
      perf::write_flamegraph_svg(out, folded, fg);
    }
  }
  return file.commit();
}

} // namespace ehelf::record
