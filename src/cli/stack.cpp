// `ehelf stack -p PID`: stops every thread of a running process with ptrace, unwinds each with
// the runtime (over ProcessMemory), and prints the stacks in the layout of `eu-stack -p PID`.
//
// Threads are seized (PTRACE_SEIZE + PTRACE_INTERRUPT, which sends no SIGSTOP: if ehelf dies
// while attached, the kernel detaches and the threads simply run on), all of them before any is
// unwound so the stacks are one consistent snapshot, and detached as soon as the walks are done;
// the output is printed afterwards. SIGINT, SIGTERM and SIGHUP only set a flag while attached:
// ehelf detaches, then dies of the signal.
#include <cstdio>
#include <cxxabi.h>
#include <fmt/format.h>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <vector>

#include "cli/commands.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/ptrace_process.hpp"
#include "runtime/symbolize.hpp"
#include "runtime/unwinder.hpp"

namespace ehelf::cli {
namespace {

struct Options {
  int pid = 0;
  std::string backend = "auto";
  bool module = false;
  bool offsets = false;
  bool raw = false;
  bool verbose = false;
  size_t max_frames = 256;
  std::vector<std::string> debug_dirs;
};

// Appends one thread's frames, as eu-stack prints them.
void print_thread(std::string& out, const Options& opt, ModuleMap& map, Symbolizer& names,
                  pid_t tid, const std::vector<FrameInfo>& frames, StopReason why) {
  fmt::format_to(std::back_inserter(out), "TID {}:\n", tid);
  size_t n = frames.size();
  for (size_t k = 0; k < n; ++k) {
    const FrameInfo& f = frames[k];
    // Like libdwfl: a frame's pc is where it was interrupted (the first frame, the caller of a
    // signal frame, a signal frame itself) or a return address, named by the call before it.
    bool activation = k == 0 || frames[k - 1].signal_frame || f.signal_frame;
    uint64_t adjusted = activation ? f.pc : f.pc - 1;
    fmt::format_to(std::back_inserter(out), "#{:<2} 0x{:016x}", k, f.pc);
    if (f.module) {
      SymbolName s = names.name(map, *f.module, adjusted);
      if (!s.name.empty()) {
        out += ' ';
        out += opt.raw ? std::string(s.name) : demangle(s.name);
        if (opt.offsets) {
          uint64_t off = f.pc - (adjusted - s.offset);
          if (off) fmt::format_to(std::back_inserter(out), "+{:#x}", off);
        }
      }
      if (opt.module) {
        out += " - ";
        out += f.module->vdso ? fmt::format("[vdso: {}]", opt.pid) : f.module->path;
      }
    }
    out += '\n';
  }
  if (opt.verbose) {
    // Why the walk ended, and what unwound its frames (the last one was not unwound).
    size_t by[4] = {}, by_frame_pointer = 0, outside_modules = 0;
    bool last_unwound = why == StopReason::None || why == StopReason::DepthLimit;
    for (size_t k = 0; k + 1 < n || (k < n && last_unwound); ++k) {
      if (frames[k].via_frame_pointer && !frames[k].module)
        ++outside_modules;
      else if (frames[k].via_frame_pointer)
        ++by_frame_pointer;
      else
        ++by[static_cast<int>(frames[k].backend)];
    }
    std::string counts;
    for (BackendKind b : {BackendKind::Compiled, BackendKind::Table, BackendKind::Interpreter})
      if (by[static_cast<int>(b)])
        fmt::format_to(std::back_inserter(counts), "{}{} {}", counts.empty() ? "" : ", ",
                       backend_name(b), by[static_cast<int>(b)]);
    if (by_frame_pointer)
      fmt::format_to(std::back_inserter(counts), "{}frame pointer {}", counts.empty() ? "" : ", ",
                     by_frame_pointer);
    if (outside_modules)
      fmt::format_to(std::back_inserter(counts), "{}frame pointer outside any module (JIT) {}",
                     counts.empty() ? "" : ", ", outside_modules);
    fmt::format_to(std::back_inserter(out), "    stopped: {}{}{}{}\n", stop_reason_name(why),
                   counts.empty() ? "" : " (unwound by ", counts, counts.empty() ? "" : ")");
  }
}

int run_stack(const Options& opt) {
  pid_t pid = opt.pid;
  if (pid <= 0) {
    fmt::print(stderr, "ehelf: pid {}: no such process\n", pid);
    return 1;
  }
  UnwinderOptions uo;
  uo.backend = backend_from_name(opt.backend);
  uo.max_depth = opt.max_frames ? opt.max_frames : (size_t(1) << 16);
  uo.policy = LoadPolicy::for_backend(uo.backend);
  // Rows found on demand: a module is never parsed whole to unwind the few pcs of a stack.
  uo.policy.whole_table = false;
  uo.policy.extra_debug_dirs = opt.debug_dirs;
  std::vector<FrameInfo> frames(uo.max_depth);

  std::string out;
  std::optional<ModuleMap> map;
  {
    TerminationGuard guard;
    ProcessAttachment attachment(pid);
    std::string err = attachment.attach_all();
    if (err.empty() && TerminationGuard::received()) err = "interrupted";
    if (!err.empty()) {
      attachment.detach_all();
      fmt::print(stderr, "ehelf: pid {}: {}\n", pid, err);
      return 1;
    }
    // The modules are read once every thread is stopped, so no library comes or goes meanwhile.
    auto m = ModuleMap::for_process(pid);
    if (!m) {
      attachment.detach_all();
      fmt::print(stderr, "ehelf: pid {}: {}\n", pid, m.error().to_string());
      return 1;
    }
    map = std::move(*m);
    ProcessMemory memory(pid);
    // The vDSO has no file: read its image from the process now (other modules load on use).
    for (Module& mod : map->modules())
      if (mod.vdso) map->load(mod, uo.policy, &memory);
    Unwinder unwinder(*map, uo);

    fmt::format_to(std::back_inserter(out), "PID {} - process\n", pid);
    struct Walk {
      pid_t tid;
      std::vector<FrameInfo> frames;
      StopReason why;
    };
    std::vector<Walk> walks;
    for (ProcessAttachment::Thread& t : attachment.threads()) {
      if (TerminationGuard::received()) break;
      if (!t.stopped) continue;
      user_regs_struct regs;
      if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) != 0) continue;
      if (is_32bit_thread(regs)) {
        attachment.detach_all();
        fmt::print(stderr, "ehelf: pid {}: a 32-bit (i386) process: ehelf unwinds x86_64 only\n",
                   pid);
        return 1;
      }
      StopReason why = StopReason::None;
      size_t n = unwinder.backtrace(to_register_state(regs), memory, frames.data(), frames.size(),
                                    &why, FrameAddress::Exact);
      walks.push_back({t.tid, {frames.begin(), frames.begin() + static_cast<ptrdiff_t>(n)}, why});
    }
    attachment.detach_all();
    if (TerminationGuard::received()) return 1; // the guard re-raises the signal
    // Symbol names come from the modules' files: no need to keep the threads stopped for them.
    Symbolizer names;
    for (const Walk& w : walks) {
      print_thread(out, opt, *map, names, w.tid, w.frames, w.why);
      // Caps are said, as eu-stack says its own.
      if (w.why == StopReason::DepthLimit)
        fmt::print(stderr, "ehelf: tid {}: shown max {} frames (-n N, 0 for unlimited)\n", w.tid,
                   w.frames.size());
    }
    // --backend compiled where a module has no eh_elf in the cache: its table unwound it.
    if (uo.backend == BackendKind::Compiled)
      for (size_t i = 0; i < map->modules().size(); ++i)
        if (const Module& mod = map->modules()[i];
            !mod.vdso && mod.data && !mod.data->compiled && mod.data->has_unwind_data() &&
            (i == 0 || map->modules()[i - 1].data != mod.data)) // once per file
          fmt::print(stderr,
                     "ehelf: {}: no eh_elf in the cache (ehelf compile --cache); unwound "
                     "with its table\n",
                     mod.path);
    if (opt.verbose)
      if (std::string slow = slow_steps_summary(unwinder.slow_steps()); !slow.empty())
        fmt::format_to(std::back_inserter(out), "    {}\n", slow);
    if (opt.verbose && attachment.skipped())
      fmt::print(stderr, "ehelf: pid {}: {} thread{} exited while being attached (skipped)\n", pid,
                 attachment.skipped(), attachment.skipped() == 1 ? "" : "s");
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return 0;
}

} // namespace

void register_stack(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "stack", "Print the stack of every thread of a running process, as eu-stack -p does");
  cmd->footer("Examples:\n  ehelf stack -p $(pidof myserver)\n  ehelf stack -p 1234 -m -o -v   # "
              "modules, offsets, why each walk stopped");
  cmd->add_option("-p,--pid", opt->pid, "Process to attach to (ptrace)")->required();
  cmd->add_option("--backend", opt->backend,
                  "Unwinding backend: auto (compiled eh_elf if cached, else table), compiled, "
                  "table or interp")
      ->check(CLI::IsMember({"auto", "compiled", "table", "interp"}));
  cmd->add_flag("-m,--module", opt->module, "Also print each frame's module file");
  add_debug_dir_option(cmd, opt->debug_dirs);
  cmd->add_flag("-o,--offsets", opt->offsets, "Print symbol+offset (offset from the symbol)");
  cmd->add_flag("-r,--raw", opt->raw, "Do not demangle symbol names");
  cmd->add_option("-n,--max-frames", opt->max_frames,
                  "At most this many frames per thread (default 256, 0: up to 65536)");
  cmd->add_flag("-v,--verbose", opt->verbose, "Print why each thread's walk stopped");
  cmd->callback([opt] { set_exit_code(run_stack(*opt)); });
}

} // namespace ehelf::cli
