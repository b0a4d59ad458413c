#include "record/output.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <unistd.h>

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
  if (path.ends_with(".svg")) return ProfileFormat::Svg;
  if (path.ends_with(".pb.gz") || path.ends_with(".pprof") || path.ends_with(".pb"))
    return ProfileFormat::Pprof;
  return ProfileFormat::Folded;
}

Status check_writable(const std::string& path) {
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) return Error::plain(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  ::close(fd);
  if (!existed) ::unlink(path.c_str()); // made again with the profile
  return Ok{};
}

Status write_profile(Recording& recording, const std::vector<perf::CountedStack>& stacks,
                     ProfileFormat format, const std::string& path, const OutputOptions& o) {
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
    return perf::write_pprof(path, stacks, po);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error::plain(fmt::format("cannot write {}", path));
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
      if (o.fold.weight_by_period) fg.count_name = o.event == "cpu-clock" ? "ns" : "events";
      perf::write_flamegraph_svg(out, folded, fg);
    }
  }
  out.flush();
  if (!out) return Error::plain(fmt::format("writing {} failed", path));
  return Ok{};
}

} // namespace ehelf::record
