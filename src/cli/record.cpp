// `ehelf record`: a sampling profiler that unwinds as it samples (src/record). Flags and
// dispatch only.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "record/output.hpp"
#include "record/recorder.hpp"

namespace ehelf::cli {
namespace {

struct Options {
  std::vector<std::string> command;
  std::vector<int> pids, tids;
  bool system_wide = false;
  std::string output = "ehelf.svg";
  std::string format;
  std::string event = "cpu-clock";
  uint64_t frequency = 999;
  uint64_t period = 0;
  uint32_t stack_size = 16384;
  double duration = 0;
  std::string backend = "auto";
  size_t max_frames = 512;
  std::vector<std::string> debug_dirs;
  bool no_kernel = false, with_pid = false, with_tid = false, weight_period = false;
  bool quiet = false, inverted = false;
  bool raw = false; // mangled names
  std::string unwind = "auto";
  uint32_t copy_every = 0;
  std::string kernel_mappings = "read";
  bool no_kernel_park = false;
  double interval = 0;
  std::string title;
  size_t top = 10;
};

// An error of the recording (no file or offset to name): its message alone.
std::string message_of(const Error& e) {
  return e.file.empty() && !e.has_offset ? "record: " + e.message : e.to_string();
}

// SIGINT and SIGTERM received: the first stops the recording, the next kills a command that did
// not end on the SIGTERM it was then sent.
std::atomic<int> g_stop_requests{0};
extern "C" void on_stop_signal(int) {
  g_stop_requests.fetch_add(1);
}

int run_record(const Options& o) {
  record::RecordOptions ro;
  auto event = record::parse_event(o.event);
  if (!event) {
    fmt::print(stderr, "ehelf: {}\n", message_of(event.error()));
    return 2;
  }
  ro.sampling.event = *event;
  ro.sampling.frequency = o.frequency;
  ro.sampling.period = o.period;
  ro.sampling.stack_size = o.stack_size;
  ro.sampling.kernel = !o.no_kernel;
  ro.command = o.command;
  ro.system_wide = o.system_wide;
  ro.duration = o.duration;
  ro.backend = backend_from_name(o.backend);
  ro.max_depth = o.max_frames ? o.max_frames : 65536;
  ro.debug_dirs = o.debug_dirs;
  ro.demangle = !o.raw;
  ro.unwind = o.unwind == "kernel" ? record::UnwindMode::Kernel
              : o.unwind == "user" ? record::UnwindMode::User
                                   : record::UnwindMode::Auto;
  ro.kernel_copy_every = o.copy_every;
  ro.kernel_find_mappings = o.kernel_mappings == "found";
  ro.kernel_park = !o.no_kernel_park;
  ro.pids = o.pids;
  ro.tids = o.tids;
  const int targets = int(!ro.command.empty()) + int(!ro.pids.empty()) + int(!ro.tids.empty()) +
                      int(ro.system_wide);
  if (targets != 1) {
    fmt::print(stderr,
               "ehelf: record: give exactly one of a command (after --), -p PID, -t TID or -a\n");
    return 2;
  }
  if (o.frequency == 0 && o.period == 0) {
    fmt::print(stderr, "ehelf: record: -F must be above 0\n");
    return 2;
  }
  auto format = record::profile_format(o.format, o.output);
  if (!format) {
    fmt::print(stderr, "ehelf: {}\n", message_of(format.error()));
    return 2;
  }
  // The output must be writable before anything runs: a recording is not repeatable. With
  // --interval, each interval goes to a file of its own (NAME.0001.EXT, ...), the last too.
  unsigned intervals = 0;
  auto output_path = [&] {
    return o.interval > 0 ? record::interval_path(o.output, intervals + 1) : o.output;
  };
  auto output = OutputFile::create(output_path());
  if (!output) {
    fmt::print(stderr, "ehelf: {}\n", message_of(output.error()));
    return 2;
  }
  ro.keep_timeline = *format == record::ProfileFormat::Script;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  const auto wall_start = std::chrono::system_clock::now();
  std::string what = !ro.command.empty() ? ro.command.front()
                     : ro.system_wide    ? std::string("the whole system")
                     : ro.tids.empty()   ? fmt::format("pid {}", fmt::join(o.pids, ","))
                                         : fmt::format("tid {}", fmt::join(o.tids, ","));
  // The profile so far (its stacks named) into `file`.
  auto write = [&](record::Recording& rec, const std::vector<perf::CountedStack>& stacks,
                   OutputFile& file) {
    record::OutputOptions out;
    out.fold.include_pid = o.with_pid;
    out.fold.include_tid = o.with_tid;
    out.fold.weight_by_period = o.weight_period;
    out.event = o.event;
    out.frequency = rec.frequency;
    out.period = o.period;
    out.start_nanos =
        std::chrono::duration_cast<std::chrono::nanoseconds>(wall_start.time_since_epoch()).count();
    out.inverted = o.inverted;
    out.title = o.title.empty() ? fmt::format("ehelf record: {}", what) : o.title;
    return record::write_profile(rec, stacks, *format, file, out);
  };
  ro.interval = o.interval;
  ro.on_interval = [&](record::Recording& rec, unsigned index) -> Status {
    const std::vector<perf::CountedStack> stacks = rec.profile.named(*rec.unwinder);
    Status written = write(rec, stacks, *output);
    if (!written) return written;
    if (!o.quiet)
      fmt::print(stderr, "ehelf: interval {}: {} samples written to {}\n", index,
                 rec.profile.samples(), output->path());
    intervals = index;
    auto next = OutputFile::create(output_path());
    if (!next) return std::move(next).error();
    *output = std::move(*next);
    return Ok{};
  };
  ro.on_note = [](const std::string& note) { fmt::print(stderr, "ehelf: {}\n", note); };
  auto recorded = record::record(ro, &g_stop_requests);
  if (!recorded) {
    fmt::print(stderr, "ehelf: {}\n", message_of(recorded.error()));
    return 2;
  }
  // The profile and the unwinder (its modules and symbols) are left to the exit.
  record::Recording* rec =
      &kept_until_exit(std::make_unique<record::Recording>(std::move(*recorded)));
  const std::vector<perf::CountedStack> stacks = rec->profile.named(*rec->unwinder);
  if (Status s = write(*rec, stacks, *output); !s) {
    fmt::print(stderr, "ehelf: {}\n", message_of(s.error()));
    return 1;
  }
  if (!o.quiet) {
    record::SummaryInput si;
    si.profile = &rec->profile;
    si.stacks = &stacks;
    si.seconds = rec->seconds;
    si.event = o.event;
    si.output = output->path();
    si.top = o.top;
    si.frames_outside_modules = rec->unwinder->frames_outside_modules();
    fmt::print(stderr, "{}", record::summary_text(si));
    fmt::print(stderr, "{}",
               rec->in_kernel ? record::kernel_walk_summary(*rec)
                              : record::user_walk_summary(*rec));
  }
  return rec->exit_status;
}

} // namespace

void register_record(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "record", "Profile a command or processes, unwinding each sample as it is taken");
  cmd->footer("Examples:\n  ehelf record -- ./prog args           # writes ehelf.svg, prints "
              "a summary\n"
              "  ehelf record -F 4000 -o prof.pb.gz -- xz -9k big.tar   # pprof\n"
              "  ehelf record -p 1234 -d 10 -o app.folded             # a running process, 10 s");
  cmd->add_option("command", opt->command, "The command to run and profile (after --)");
  // Each id of a comma-separated list (-p 12,34): a positive number.
  auto id_of = [](std::string what) {
    return CLI::Validator(
        [what](std::string& v) {
          int id = 0;
          auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
          return ec == std::errc() && end == v.data() + v.size() && id > 0
                     ? std::string()
                     : "'" + v + "' is not " + what;
        },
        "ID");
  };
  cmd->add_option("-p,--pid", opt->pids, "Profile these running processes (PID[,PID...])")
      ->delimiter(',')
      ->check(id_of("a process id"));
  cmd->add_option("-t,--tid", opt->tids,
                  "Profile these threads of running processes (TID[,TID...]), as perf record -t")
      ->delimiter(',')
      ->check(id_of("a thread id"));
  cmd->add_flag("-a,--all-cpus", opt->system_wide, "Profile the whole system");
  cmd->add_option("-o,--output", opt->output,
                  "Where the profile goes (default ehelf.svg); its extension picks the format");
  cmd->add_option("-f,--format", opt->format,
                  "folded (flamegraph.pl, speedscope), svg (interactive flame graph), pprof "
                  "(gzipped profile.proto) or script (perf script's layout, per sample)")
      ->check(CLI::IsMember({"folded", "svg", "pprof", "script"}));
  cmd->add_option("-e,--event", opt->event, "The event to sample (default cpu-clock)");
  auto* freq = cmd->add_option("-F,--freq", opt->frequency, "Samples per second (default 999)");
  cmd->add_option("-c,--count", opt->period, "One sample every this many events (instead of -F)")
      ->excludes(freq);
  cmd->add_option("--stack-size", opt->stack_size,
                  "Bytes of user stack copied per sample (default 16384, at most 65528)")
      ->check(CLI::Range(uint32_t(8), record::kMaxStackSize) &
              CLI::Validator(
                  [](std::string& v) {
                    uint32_t n = 0;
                    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
                    return ec == std::errc() && n % 8 ? std::string("not a multiple of 8")
                                                      : std::string();
                  },
                  "MULTIPLE OF 8"));
  cmd->add_option("-d,--duration", opt->duration,
                  "Stop after this many seconds (a command still running gets SIGTERM)");
  cmd->add_option("--backend", opt->backend, "Unwinding backend: auto, compiled, table or interp")
      ->check(CLI::IsMember({"auto", "compiled", "table", "interp"}));
  cmd->add_option("-n,--max-frames", opt->max_frames,
                  "At most this many user frames per sample (default 512, 0: 65536)");
  cmd->add_flag("--no-kernel", opt->no_kernel, "Sample user space only");
  cmd->add_option("--unwind", opt->unwind,
                  "Where user stacks are walked: kernel (a BPF program: no stack bytes leave the "
                  "kernel; root or CAP_BPF+CAP_PERFMON), user (from a copy of each sample's "
                  "stack) or auto (default: kernel where allowed, else user, saying why)")
      ->check(CLI::IsMember({"auto", "kernel", "user"}));
  cmd->add_option("--interval", opt->interval,
                  "Write the profile every this many seconds, each interval to a file of its own "
                  "(NAME.0001.EXT, NAME.0002.EXT...), and start a new one")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kernel-copy-every", opt->copy_every,
                  "Kernel mode's check: also copy every Nth sample's stack, walk it in user "
                  "space too and compare the two walks (the summary says how they agree)");
  cmd->add_option("--kernel-mappings", opt->kernel_mappings,
                  "Kernel mode: where the walk finds the file of a pc: read (default: the "
                  "process's mappings, read from /proc/PID/maps; the kernel's own only for a pc "
                  "outside them, as between an exec and that read) or found (always the "
                  "kernel's, once per file in each walk: slower; the fallback, for every sample)")
      ->check(CLI::IsMember({"read", "found"}));
  cmd->add_flag("--no-kernel-park", opt->no_kernel_park,
                "Kernel mode: count a sample whose tables are not loaded yet as it stopped, "
                "instead of keeping it in the kernel (with 16 KiB of its stack, never handed "
                "out; ~20 MiB in all) and walking it again once they are");
  add_debug_dir_option(cmd, opt->debug_dirs);
  cmd->add_flag("-r,--raw", opt->raw, "Do not demangle C++ names");
  cmd->add_flag("--pid-roots", opt->with_pid, "folded/svg: one root per process (comm-PID)");
  cmd->add_flag("--tid-roots", opt->with_tid, "folded/svg: one root per thread (comm-PID/TID)");
  cmd->add_flag("--period", opt->weight_period,
                "folded/svg: weigh samples by their period (ns for cpu-clock)");
  cmd->add_option("--title", opt->title, "svg: the flame graph's title");
  cmd->add_flag("--inverted,--icicle", opt->inverted,
                "svg: an icicle graph, callers above their callees, the root at the top (deep "
                "stacks start on the first screen)");
  cmd->add_option("--top", opt->top, "Functions in the summary's top lists (default 10)");
  cmd->add_flag("-q,--quiet", opt->quiet, "No summary");
  // An option ehelf does not know is most often the command's own, given without -- (ehelf
  // record -o g.svg ls -l): said with the way to write it, rather than CLI11's bare complaint.
  cmd->allow_extras();
  cmd->callback([opt, cmd] {
    // (CLI11 keeps the -- itself among them)
    const std::vector<std::string> extra = cmd->remaining();
    if (auto unknown = std::find_if(extra.begin(), extra.end(),
                                    [](const std::string& arg) { return arg != "--"; });
        unknown != extra.end()) {
      fmt::print(stderr,
                 "ehelf: record: unknown option '{}' (a command to profile goes after --, with its "
                 "own options: ehelf record [OPTIONS] -- CMD ARGS...; see --help)\n",
                 *unknown);
      set_exit_code(2);
      return;
    }
    // A flag of one mode given with the other one named is said, not ignored (under auto, each
    // applies if its mode is the one taken).
    auto given = [&](const char* name) { return cmd->count(name) > 0; };
    for (const char* kernel_only :
         {"--kernel-copy-every", "--kernel-mappings", "--no-kernel-park"}) {
      if (opt->unwind == "user" && given(kernel_only)) {
        fmt::print(stderr, "ehelf: record: {} is for the in-kernel walk, not --unwind user\n",
                   kernel_only);
        set_exit_code(2);
        return;
      }
    }
    if (opt->unwind == "kernel" && given("--stack-size") && !given("--kernel-copy-every")) {
      fmt::print(stderr, "ehelf: record: --stack-size is the size of the stack copies, which "
                         "--unwind kernel makes only with --kernel-copy-every\n");
      set_exit_code(2);
      return;
    }
    set_exit_code(run_record(*opt));
  });
}

} // namespace ehelf::cli
