// In-process unwinding: a call chain through libc's qsort, walked with every backend, checked
// against glibc's backtrace() and the symbols we expect.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <execinfo.h>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "runtime/local.hpp"
#include "runtime/proc_files.hpp"
#include "runtime/unwinder.hpp"

namespace ehelf {
namespace {

struct Walk {
  std::vector<uint64_t> ours;
  std::vector<uint64_t> glibc;
  StopReason why = StopReason::None;
};

// Copies live stack memory as a profiler's sampler does: raw, including bytes that
// AddressSanitizer marks as redzones (it would otherwise report this copy).
__attribute__((no_sanitize_address, noinline)) void copy_stack(void* dst, const void* src,
                                                               size_t n) {
  auto* d = static_cast<volatile uint8_t*>(dst);
  auto* s = static_cast<const volatile uint8_t*>(src);
  for (size_t i = 0; i < n; ++i)
    d[i] = s[i];
}

// glibc's backtrace() starts at its caller's frame in take_walk; under AddressSanitizer its
// interceptor adds one frame first. Returns where glibc's list reaches `ours[1]` (take_walk's
// caller), so the two walks can be compared from there.
size_t glibc_offset(const std::vector<uint64_t>& ours, const std::vector<uint64_t>& glibc) {
  if (ours.size() < 2) return 1;
  for (size_t k = 1; k < glibc.size() && k <= 3; ++k)
    if (glibc[k] == ours[1]) return k;
  return 1;
}

BackendKind g_backend = BackendKind::Table;
bool g_fast = false;
bool g_snapshot = false;
int g_depth = 0;
int g_descended_from = -1; // reset by each test
Walk* g_walk = nullptr;

__attribute__((noinline)) void take_walk() {
  if (!g_walk->ours.empty()) return; // qsort calls the comparison several times: walk once
  RegisterState regs = capture_local();
  void* frames[128];
  int n = ::backtrace(frames, 128);
  for (int i = 0; i < n; ++i)
    g_walk->glibc.push_back(reinterpret_cast<uint64_t>(frames[i]));
  static ModuleMap map = ModuleMap::for_self();
  UnwinderOptions o;
  o.backend = g_backend;
  Unwinder u(map, o);
  if (g_snapshot) {
    // A perf-style sample: registers plus a copy of the live stack, unwound from the copy.
    AddressRange st = current_thread_stack();
    uint64_t sp = regs.get(x86_64::RSP);
    std::vector<uint8_t> copy(std::min<uint64_t>(st.end - sp, 256 * 1024));
    copy_stack(copy.data(), reinterpret_cast<const void*>(sp), copy.size());
    SnapshotMemory mem(sp, copy);
    FrameInfo out[128];
    size_t count = u.backtrace(regs, mem, out, 128, &g_walk->why, FrameAddress::ReturnAddress);
    for (size_t i = 0; i < count; ++i)
      g_walk->ours.push_back(out[i].pc);
  } else if (g_fast) {
    // The hot path, twice: the second walk runs from the cache.
    uint64_t pcs[128];
    for (int pass = 0; pass < 2; ++pass) {
      g_walk->ours.clear();
      size_t count = u.backtrace_local(regs, current_thread_stack(), pcs, 128, &g_walk->why,
                                       FrameAddress::ReturnAddress);
      g_walk->ours.assign(pcs, pcs + count);
    }
  } else {
    LocalMemory mem(current_thread_stack());
    FrameInfo out[128];
    size_t count = u.backtrace(regs, mem, out, 128, &g_walk->why, FrameAddress::ReturnAddress);
    for (size_t i = 0; i < count; ++i)
      g_walk->ours.push_back(out[i].pc);
  }
  asm volatile("" ::: "memory");
}

int compare_ints(const void* a, const void* b);

__attribute__((noinline)) void recurse_via_qsort(int depth) {
  g_depth = depth;
  int v[3] = {3, 1, 2};
  qsort(v, 3, sizeof v[0], compare_ints);
  asm volatile("" ::: "memory");
}

int compare_ints(const void* a, const void* b) {
  // Descend on the first comparison of each level only; the walk happens at the bottom.
  int depth = g_depth;
  if (g_descended_from != depth) {
    g_descended_from = depth;
    if (depth > 0)
      recurse_via_qsort(depth - 1);
    else
      take_walk();
  }
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

class LocalUnwind : public ::testing::TestWithParam<BackendKind> {};

TEST_P(LocalUnwind, MatchesGlibcBacktraceThroughQsort) {
  Walk w;
  g_walk = &w;
  g_backend = GetParam();
  g_descended_from = -1;
  recurse_via_qsort(0);
  g_walk = nullptr;
  ASSERT_GE(w.glibc.size(), 5u);
  ASSERT_GE(w.ours.size(), 5u) << stop_reason_name(w.why);
  size_t k = glibc_offset(w.ours, w.glibc);
  std::string diffs;
  size_t same = 0, n = std::min(w.ours.size() - 1, w.glibc.size() - k);
  for (size_t i = 0; i < n; ++i) {
    uint64_t a = w.ours[1 + i], b = w.glibc[k + i];
    same += a == b;
    if (a != b) {
      auto where = [](uint64_t pc) {
        Dl_info info{};
        if (!dladdr(reinterpret_cast<void*>(pc), &info) || !info.dli_sname)
          return std::string(info.dli_fname ? info.dli_fname : "?") + "@" +
                 std::to_string(pc - reinterpret_cast<uint64_t>(info.dli_fbase));
        return std::string(info.dli_sname) + "+" +
               std::to_string(pc - reinterpret_cast<uint64_t>(info.dli_saddr));
      };
      diffs += " #" + std::to_string(1 + i) + " ours " + where(a) + " glibc " + where(b) + ";";
    }
  }
  EXPECT_EQ(same, n) << "ours " << w.ours.size() << " frames, glibc " << w.glibc.size() << ":"
                     << diffs;
  EXPECT_EQ(w.ours.size() - 1, w.glibc.size() - k) << stop_reason_name(w.why);
}

// Our walk and glibc's agree frame for frame from take_walk's caller on, and end together.
void expect_same_walk(const Walk& w) {
  ASSERT_GE(w.ours.size(), 8u) << stop_reason_name(w.why);
  size_t k = glibc_offset(w.ours, w.glibc);
  ASSERT_EQ(w.ours.size() - 1, w.glibc.size() - k) << stop_reason_name(w.why);
  for (size_t i = 1; i < w.ours.size(); ++i)
    EXPECT_EQ(w.ours[i], w.glibc[k + i - 1]) << "frame " << i;
}

TEST(LocalUnwindFast, CachedPathMatchesGlibcBacktrace) {
  Walk w;
  g_walk = &w;
  g_backend = BackendKind::Auto;
  g_fast = true;
  g_descended_from = -1;
  recurse_via_qsort(3);
  g_fast = false;
  g_walk = nullptr;
  expect_same_walk(w);
}

TEST(SnapshotUnwind, StackCopyGivesTheLiveWalk) {
  for (BackendKind b : {BackendKind::Table, BackendKind::Interpreter}) {
    Walk w;
    g_walk = &w;
    g_backend = b;
    g_snapshot = true;
    g_descended_from = -1;
    recurse_via_qsort(2);
    g_snapshot = false;
    g_walk = nullptr;
    expect_same_walk(w);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LocalUnwind,
                         ::testing::Values(BackendKind::Table, BackendKind::Interpreter,
                                           BackendKind::Auto),
                         [](const auto& info) { return std::string(backend_name(info.param)); });

TEST(LocalUnwind, GarbageStacksNeverFault) {
  static ModuleMap map = ModuleMap::for_self();
  map.load_all();
  Unwinder u(map);
  std::vector<uint64_t> stack(4096);
  uint64_t lo = reinterpret_cast<uint64_t>(stack.data());
  std::srand(7);
  // Some words are plausible: pcs inside loaded modules and pointers into the buffer.
  std::vector<uint64_t> pcs;
  for (const auto& m : map.modules())
    pcs.push_back(m.start + (m.end - m.start) / 3);
  for (int round = 0; round < 2000; ++round) {
    for (auto& w : stack) {
      int k = std::rand() % 4;
      w = k == 0   ? pcs[std::rand() % pcs.size()]
          : k == 1 ? lo + 8 * (std::rand() % stack.size())
                   : (uint64_t(std::rand()) << 32) ^ std::rand();
    }
    RegisterState regs;
    regs.set(x86_64::RIP, pcs[std::rand() % pcs.size()] + std::rand() % 64);
    regs.set(x86_64::RSP, lo + 8 * (std::rand() % stack.size()));
    regs.set(x86_64::RBP, stack[std::rand() % stack.size()]);
    LocalMemory mem(AddressRange{lo, lo + 8 * stack.size()});
    FrameInfo out[64];
    StopReason why;
    size_t n = u.backtrace(regs, mem, out, 64, &why, FrameAddress::Exact);
    EXPECT_LE(n, 64u);
  }
}

} // namespace
} // namespace ehelf

// ---- /proc files (runtime/proc_files) ----

namespace ehelf {
namespace {

TEST(ProcFiles, MapsLinesAsTheKernelPrintsThem) {
  ProcMapping m;
  ASSERT_TRUE(parse_proc_maps_line(
      "7f0a1c000000-7f0a1c021000 r-xp 00002000 fd:01 1234567                    "
      "/usr/lib/my lib.so (deleted)",
      m));
  EXPECT_EQ(m.start, 0x7f0a1c000000u);
  EXPECT_EQ(m.end, 0x7f0a1c021000u);
  EXPECT_EQ(m.offset, 0x2000u);
  EXPECT_TRUE(m.executable);
  EXPECT_FALSE(m.writable);
  EXPECT_EQ(m.path, "/usr/lib/my lib.so (deleted)");
  EXPECT_TRUE(m.deleted());
  EXPECT_EQ(m.open_path(42), "/proc/42/map_files/7f0a1c000000-7f0a1c021000");
  ASSERT_TRUE(parse_proc_maps_line("7ffd1000-7ffd3000 rw-p 00000000 00:00 0 ", m));
  EXPECT_FALSE(m.executable);
  EXPECT_TRUE(m.writable);
  EXPECT_EQ(m.path, "");
  EXPECT_FALSE(parse_proc_maps_line("garbage", m));
  EXPECT_FALSE(parse_proc_maps_line("7000-6000 r-xp 0 00:00 0 [bad]", m));
}

TEST(ProcFiles, ThisProcessHasItsCodeMappedFromItsExecutable) {
  char exe[PATH_MAX] = {};
  ASSERT_GT(::readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
  const auto here = reinterpret_cast<uint64_t>(&parse_proc_maps_line);
  auto maps = read_proc_maps(::getpid(), true);
  ASSERT_TRUE(maps);
  bool found = false, vdso = false;
  for (const ProcMapping& m : *maps) {
    EXPECT_TRUE(m.executable);
    vdso |= m.path == "[vdso]";
    found |= m.start <= here && here < m.end && m.path == exe;
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(vdso);
  auto threads = proc_threads(::getpid());
  ASSERT_TRUE(threads);
  EXPECT_NE(std::find(threads->begin(), threads->end(), ::getpid()), threads->end());
  EXPECT_FALSE(proc_threads(0x7ffffff0));
  // This process runs (its stat says R) and has the parent getppid() names; no process is 0.
  EXPECT_EQ(proc_state(::getpid()), 'R');
  EXPECT_EQ(proc_parent(::getpid()), ::getppid());
  EXPECT_EQ(proc_state(0x7ffffff0), 0);
  EXPECT_EQ(proc_parent(0x7ffffff0), 0);
  // proc_runs: a thread on a CPU (this one), not a process whose threads all sleep (a child in
  // pause()), nor one that is gone.
  EXPECT_TRUE(proc_runs(::getpid()));
  const pid_t sleeper = ::fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    for (;;)
      ::pause();
  }
  bool slept = false;
  for (int i = 0; i < 200 && !slept; ++i) { // until it has reached pause()
    slept = proc_state(sleeper) == 'S';
    if (!slept) ::usleep(5000);
  }
  EXPECT_TRUE(slept);
  EXPECT_FALSE(proc_runs(sleeper));
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
  EXPECT_FALSE(proc_runs(sleeper));
}

// proc_address_space: this process's code starts in an executable mapping of its executable and
// its stack in [stack] (the oracle: its maps); it is the same read twice; a fork has its parent's,
// an exec another; a kernel thread has none; no process, nullopt.
TEST(ProcFiles, AddressSpaceIsWhereCodeAndStackBegin) {
  auto space = proc_address_space(::getpid());
  ASSERT_TRUE(space);
  EXPECT_EQ(proc_address_space(::getpid()), space);
  char exe[PATH_MAX] = {};
  ASSERT_GT(::readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
  auto maps = read_proc_maps(::getpid());
  ASSERT_TRUE(maps);
  bool code = false, stack = false;
  for (const ProcMapping& m : *maps) {
    code |=
        m.executable && m.path == exe && m.start <= space->start_code && space->start_code < m.end;
    stack |= m.path == "[stack]" && m.start <= space->start_stack && space->start_stack < m.end;
  }
  EXPECT_TRUE(code) << std::hex << space->start_code;
  EXPECT_TRUE(stack) << std::hex << space->start_stack;
  EXPECT_FALSE(proc_address_space(0x7ffffff0));
  if (auto kthreadd = proc_address_space(2); kthreadd && proc_parent(2) == 0) {
    EXPECT_EQ(*kthreadd, ProcAddressSpace{}); // (pid 2 is kthreadd outside a pid namespace)
  }

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    // Forked: its parent's address space until the exec.
    const auto forked = proc_address_space(::getpid());
    const char verdict = forked == space ? 'y' : 'n';
    (void)!::write(ready[1], &verdict, 1);
    ::execlp("sleep", "sleep", "10", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(ready[1]);
  char verdict = 0;
  ASSERT_EQ(::read(ready[0], &verdict, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(verdict, 'y');
  // Exec'd: another program's code and stack.
  std::optional<ProcAddressSpace> after;
  for (int i = 0; i < 400; ++i) {
    after = proc_address_space(child);
    if (after && after->start_code != space->start_code) break;
    ::usleep(5000);
  }
  ASSERT_TRUE(after);
  EXPECT_NE(after->start_code, space->start_code);
  EXPECT_NE(after->start_stack, space->start_stack);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

} // namespace
} // namespace ehelf
