// elfutils libdwfl (libdw-dev) unwinding this process: modules from /proc/self/maps, thread
// state from our own callbacks (registers captured in the walking function, memory read
// directly, bounded to the thread's stack), frames from dwfl_getthread_frames.
#include <elfutils/libdwfl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "dwfl_frames.hpp"
#include "peer.hpp"

namespace bench {
namespace {

Dwfl* g_dwfl;
pid_t g_tid;
uint64_t g_regs[17];
uint64_t g_lo, g_hi;

pid_t next_thread(Dwfl*, void*, void** thread_argp) {
  if (*thread_argp) return 0;
  *thread_argp = reinterpret_cast<void*>(1);
  return g_tid;
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void*) {
  if (addr < g_lo || addr > g_hi - 8) return false;
  std::memcpy(result, reinterpret_cast<const void*>(addr), 8);
  return true;
}

bool set_initial_registers(Dwfl_Thread* thread, void*) {
  Dwarf_Word regs[17];
  for (int i = 0; i < 17; ++i)
    regs[i] = g_regs[i];
  return dwfl_thread_state_registers(thread, 0, 17, regs);
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    next_thread, nullptr, memory_read, set_initial_registers, nullptr, nullptr,
};

char* g_debuginfo_path;
const Dwfl_Callbacks kCallbacks = {
    dwfl_linux_proc_find_elf,
    dwfl_standard_find_debuginfo,
    nullptr,
    &g_debuginfo_path,
};

std::string init() {
  if (g_dwfl) return "";
  g_tid = pid_t(syscall(SYS_gettid));
  thread_stack(g_lo, g_hi);
  g_dwfl = dwfl_begin(&kCallbacks);
  if (!g_dwfl) return "dwfl_begin failed";
  if (dwfl_linux_proc_report(g_dwfl, getpid()) != 0) return "dwfl_linux_proc_report failed";
  if (dwfl_report_end(g_dwfl, nullptr, nullptr) != 0) return "dwfl_report_end failed";
  if (!dwfl_attach_state(g_dwfl, nullptr, getpid(), &kThreadCallbacks, nullptr))
    return std::string("dwfl_attach_state: ") + dwfl_errmsg(-1);
  return "";
}

// Why a walk ended early, said once (on stderr) so that a short count in the table has a reason.
__attribute__((noinline, cold)) void report_stop(size_t n) {
  static bool said;
  if (said) return;
  said = true;
  std::fprintf(stderr, "libdwfl: walk stopped after %zu frames: %s\n", n, dwfl_errmsg(-1));
}

__attribute__((noinline)) size_t once(uint64_t* pcs, size_t max, bool) {
  ehelf_capture_context(g_regs);
  DwflWalk w{pcs, 0, max};
  int rc = dwfl_getthread_frames(g_dwfl, g_tid, dwfl_collect_pc, &w);
  if (rc != 0 && w.n < w.max) report_stop(w.n);
  asm volatile("" ::: "memory");
  return w.n;
}

} // namespace

void add_dwfl_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = "elfutils libdwfl";
  p.cold_means = "no flush API short of a new Dwfl session: its per-module CFI caches keep the "
                 "FDEs already seen (the sample's new call sites still miss)";
  p.init = init;
  p.once = once;
  peers.push_back(p);
}

} // namespace bench
