// `ehelf perf [FILE]`: the stacks of a `perf record --call-graph dwarf` recording, unwound by
// ehelf from each sample's registers and stack copy, printed as perf script does, as folded
// stacks, as a flame graph (SVG) or as JSON lines.
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "cli/commands.hpp"
#include "perf/flamegraph.hpp"
#include "perf/folded.hpp"
#include "perf/perf_data.hpp"
#include "perf/record_stream.hpp"
#include "perf/sample_unwinder.hpp"
#include "perf/script_output.hpp"
#include "perf/stack_pipeline.hpp"
#include "record/profile.hpp"
#include "support/output_file.hpp"
#include "support/progress.hpp"

namespace ehelf::cli {
namespace {

struct Options {
  std::string input; // empty: standard input when it is a pipe, else perf.data
  std::string format = "script";
  std::string output;
  std::string backend = "auto";
  std::string title;
  bool inverted = false;
  size_t max_frames = 512;
  bool no_kernel = false;
  bool raw = false;
  bool with_pid = false, with_tid = false, period = false, offsets = false, verbose = false;
  bool no_progress = false;
  unsigned jobs = std::thread::hardware_concurrency() > 1 ? 2 : 1;
  std::vector<std::string> debug_dirs;
};

int run_perf(const Options& o) {
  // As perf: "-" is standard input, and so is no file named while standard input is a pipe.
  struct stat in {};
  const bool from_stdin =
      o.input == "-" || (o.input.empty() && ::fstat(0, &in) == 0 && S_ISFIFO(in.st_mode));
  auto opened = from_stdin ? perf::PerfData::read_stream(0, "<stdin>")
                           : perf::PerfData::open(o.input.empty() ? "perf.data" : o.input);
  if (!opened) {
    fmt::print(stderr, "ehelf: {}\n", opened.error().to_string());
    return 1;
  }
  // The recording, the unwinder (its modules and symbols) and the profile are left to the exit.
  const perf::PerfData* data =
      &kept_until_exit(std::make_unique<perf::PerfData>(std::move(*opened)));
  std::optional<OutputFile> file;
  if (!o.output.empty()) {
    auto created = OutputFile::create(o.output);
    if (!created) {
      fmt::print(stderr, "ehelf: {}\n", created.error().to_string());
      return 1;
    }
    file.emplace(std::move(*created));
  }
  std::ostream& out = file ? file->stream() : std::cout;

  perf::SampleUnwinderOptions uo;
  uo.backend = backend_from_name(o.backend);
  uo.max_depth = o.max_frames ? o.max_frames : 65536;
  uo.kernel = !o.no_kernel;
  uo.demangle = !o.raw;
  uo.debug_dirs = o.debug_dirs;
  perf::SampleUnwinder& unwinder =
      kept_until_exit(std::make_unique<perf::SampleUnwinder>(*data, uo));
  perf::FoldOptions fo;
  fo.include_pid = o.with_pid;
  fo.include_tid = o.with_tid;
  fo.weight_by_period = o.period;
  fo.addresses = o.offsets;
  perf::FoldedStacks& folded = kept_until_exit(std::make_unique<perf::FoldedStacks>());
  perf::ScriptOptions so;
  so.offsets = o.offsets;
  so.stop = o.verbose;
  // On a terminal, unless the output is printed there too (perf script's way); for a file, whose
  // size says how far it is.
  DelayedProgress progress("ehelf perf", "MiB",
                           !from_stdin && !o.no_progress && ::isatty(STDERR_FILENO) &&
                               (!o.output.empty() || !::isatty(STDOUT_FILENO)));
  // Records are decoded round by round as they are consumed: memory holds a round, not the
  // recording, and a pipe is read as it comes.
  perf::RecordStream records(*data);
  // Folded stacks and flame graphs need each distinct stack named once (Profile): with -j 2 on a
  // second thread as it is first seen; naming every sample there instead was slower on four
  // recordings of five.
  const bool aggregate = o.format == "folded" || o.format == "svg";
  record::Profile& profile = kept_until_exit(std::make_unique<record::Profile>());
  const uint64_t size_mib = data->data_end() >> 20;
  auto update_progress = [&] { progress.update(records.position() >> 20, size_mib); };
  auto use = [&](const perf::SampleStack& stack) {
    if (o.format == "script")
      perf::write_script(out, stack, so);
    else if (o.format == "json")
      perf::write_json_line(out, stack);
    else
      perf::add_folded(folded, stack, fo);
  };
  if (aggregate && o.jobs > 1) {
    // Each distinct stack named and folded on a second thread as it is first seen.
    profile.add_recording_summarized(
        records, unwinder, [&](const perf::SampleStack& s) { return perf::folded_stack(s, fo); },
        use, update_progress);
    profile.for_each_summary([&](const std::string& line, uint64_t samples, uint64_t period) {
      folded[line] += o.period ? period : samples;
    });
  } else if (aggregate) {
    profile.add_recording(records, unwinder, use, update_progress);
    profile.for_each_named(unwinder, [&](const perf::CountedStack& c) {
      perf::add_folded(folded, c.stack, fo, o.period ? c.period : c.samples);
    });
  } else {
    perf::StackPipelineOptions po;
    po.threads = o.jobs;
    po.progress = update_progress;
    perf::for_each_stack(records, unwinder, use, po);
  }
  progress.finish();
  if (o.format == "folded") {
    perf::write_folded(out, folded);
  } else if (o.format == "svg") {
    perf::FlameGraphOptions fg;
    fg.title = o.title.empty() ? "Flame Graph: " + (from_stdin        ? std::string("<stdin>")
                                                    : o.input.empty() ? std::string("perf.data")
                                                                      : o.input)
                               : o.title;
    if (o.period) fg.count_name = "period"; // the event's unit (ns for cpu-clock)
    fg.inverted = o.inverted;
    perf::write_flamegraph_svg(out, folded, fg);
  }
  if (file) {
    if (Status s = file->commit(); !s) {
      fmt::print(stderr, "ehelf: {}\n", s.error().to_string());
      return 1;
    }
  } else if (!out.flush()) {
    fmt::print(stderr, "ehelf: writing stdout failed\n");
    return 1;
  }
  const perf::UnwindStats& st = unwinder.stats();
  if (o.verbose)
    fmt::print(stderr,
               "ehelf: {} samples ({} with a user stack), {} frames, {} walks ended before the "
               "outermost frame, {} mapped files not usable here\n",
               st.samples, st.user_samples, st.frames, st.stopped_early, st.modules_missing);
  if (o.verbose)
    if (std::string slow = slow_steps_summary(unwinder.slow_steps()); !slow.empty())
      fmt::print(stderr, "ehelf: {}\n", slow);
  if (o.verbose)
    if (const uint64_t jit = unwinder.frames_outside_modules())
      fmt::print(stderr, "ehelf: {} frame{} in code outside any module (JIT) unwound by rbp\n", jit,
                 jit == 1 ? "" : "s");
  std::optional<Error> damage = data->header_damage();
  if (!damage) damage = records.damage(); // the header says why first
  if (damage) {
    // Everything before the damage was processed; fail only when that was nothing.
    fmt::print(stderr, "ehelf: {}; {} sample{} read before it\n", damage->to_string(), st.samples,
               st.samples == 1 ? "" : "s");
    return st.samples ? 0 : 1;
  }
  return 0;
}

} // namespace

void register_perf(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "perf", "Unwind the samples of `perf record --call-graph dwarf` and print their stacks");
  cmd->footer("Examples:\n  perf record -e cpu-clock --call-graph dwarf -o perf.data -- ./prog\n"
              "  ehelf perf -i perf.data > out.txt       # perf script's layout\n"
              "  ehelf perf -f svg -o flame.svg perf.data");
  cmd->add_option("file", opt->input,
                  "perf.data file (default: perf.data; standard input when it is a pipe, or -)");
  cmd->add_option("-i,--input", opt->input, "perf.data file, as perf's -i");
  cmd->add_option("-f,--format", opt->format,
                  "script (perf script's layout), folded (for flamegraph.pl), svg (a flame "
                  "graph) or json (one object per sample)")
      ->check(CLI::IsMember({"script", "folded", "svg", "json"}));
  cmd->add_option("-o,--output", opt->output, "Write here instead of standard output");
  cmd->add_option("--backend", opt->backend, "Unwinding backend: auto, compiled, table or interp")
      ->check(CLI::IsMember({"auto", "compiled", "table", "interp"}));
  cmd->add_option("-n,--max-frames", opt->max_frames,
                  "At most this many user frames per sample (default 512, 0: 65536)");
  cmd->add_flag("--no-kernel", opt->no_kernel, "Leave out kernel frames");
  add_debug_dir_option(cmd, opt->debug_dirs);
  cmd->add_flag("-r,--raw", opt->raw, "Do not demangle C++ names");
  // --pid-roots and --tid-roots as in ehelf record, where --pid and --tid are perf record's
  // (which processes or threads); --pid and --tid as stackcollapse-perf.pl spells them.
  cmd->add_flag("--pid-roots,--pid", opt->with_pid, "folded/svg: one root per process (comm-PID)");
  cmd->add_flag("--tid-roots,--tid", opt->with_tid,
                "folded/svg: one root per thread (comm-PID/TID)");
  cmd->add_flag("--period", opt->period, "folded/svg: weigh samples by their period");
  cmd->add_flag("--offsets", opt->offsets, "Print symbol+offset");
  cmd->add_flag("--no-progress", opt->no_progress,
                "No progress bar (shown on a terminal after a second, when the output is not "
                "printed there)");
  cmd->add_option("-j,--jobs", opt->jobs,
                  "Threads for the script and json layouts: 1 unwinds and names each sample in "
                  "turn; 2 (the default on more than one CPU) unwinds on one and names and prints "
                  "on another")
      ->check(CLI::Range(1u, 2u));
  cmd->add_option("--title", opt->title, "svg: the flame graph's title");
  cmd->add_flag("--inverted,--icicle", opt->inverted,
                "svg: an icicle graph, callers above their callees, the root at the top (deep "
                "stacks start on the first screen)");
  cmd->add_flag("-v,--verbose", opt->verbose,
                "Say why each walk ended (script) and print a summary on stderr");
  cmd->callback([opt] { set_exit_code(run_perf(*opt)); });
}

} // namespace ehelf::cli
