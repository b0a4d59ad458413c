// Unwinding from a SIGPROF handler, the way a sampling profiler does: through the kernel's signal
// frame (__restore_rt), out of the vDSO (the sampled thread spins in clock_gettime), while another
// thread keeps loading and unloading a library. Every walk must end cleanly, reach the sampled
// thread's start routine, and never fault.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/local.hpp"
#include "runtime/unwinder.hpp"

namespace ehelf {
namespace {

constexpr int kMaxSamples = 400;
constexpr size_t kMaxFrames = 64;

struct Sample {
  size_t frames = 0;
  uint64_t pcs[kMaxFrames];
  StopReason why = StopReason::None;
};

Sample g_samples[kMaxSamples];
std::atomic<int> g_count{0};
std::atomic<bool> g_stop{false};
std::atomic<bool> g_ready{false};
Unwinder* g_unwinder = nullptr; // used only by the sampled thread's handler
AddressRange g_stack;           // the sampled thread's stack

void on_sigprof(int, siginfo_t*, void*) {
  int i = g_count.load(std::memory_order_relaxed);
  if (i >= kMaxSamples || !g_unwinder) return;
  int saved_errno = errno;
  RegisterState regs = capture_local();
  Sample& s = g_samples[i];
  s.frames = g_unwinder->backtrace_local(regs, g_stack, s.pcs, kMaxFrames, &s.why,
                                         FrameAddress::ReturnAddress);
  g_count.store(i + 1, std::memory_order_release);
  errno = saved_errno;
}

__attribute__((noinline)) void spin_in_vdso() {
  timespec ts;
  while (!g_stop.load(std::memory_order_relaxed)) {
    for (int k = 0; k < 1000; ++k)
      clock_gettime(CLOCK_MONOTONIC, &ts);
    asm volatile("" ::: "memory");
  }
}

void* sampled_thread(void*) {
  g_stack = current_thread_stack();
  g_ready = true;
  spin_in_vdso();
  return nullptr;
}

void* dlopen_thread(void*) {
  while (!g_stop.load(std::memory_order_relaxed)) {
    void* h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
    void* h2 = dlopen("libbz2.so.1.0", RTLD_NOW | RTLD_LOCAL);
    if (h2) dlclose(h2);
  }
  return nullptr;
}

TEST(SignalUnwind, ProfilerSamplesThroughSignalFrameAndVdso) {
  static ModuleMap map = ModuleMap::for_self();
  map.load_all(); // everything the handler may need is loaded before any signal
  UnwinderOptions options;
  options.allow_loading = false; // the handler must not load, allocate or lock
  static Unwinder unwinder(map, options);
  g_unwinder = &unwinder;

  struct sigaction sa {};
  sa.sa_sigaction = on_sigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGPROF, &sa, nullptr), 0);

  pthread_t sampled, loader;
  ASSERT_EQ(pthread_create(&sampled, nullptr, sampled_thread, nullptr), 0);
  ASSERT_EQ(pthread_create(&loader, nullptr, dlopen_thread, nullptr), 0);
  while (!g_ready)
    usleep(100);
  // Signal the sampled thread directly, at a steady rate.
  for (int i = 0; i < kMaxSamples * 4 && g_count.load() < kMaxSamples; ++i) {
    pthread_kill(sampled, SIGPROF);
    usleep(500);
  }
  g_stop = true;
  pthread_join(sampled, nullptr);
  pthread_join(loader, nullptr);
  signal(SIGPROF, SIG_IGN);
  g_unwinder = nullptr;

  int n = g_count.load(std::memory_order_acquire);
  ASSERT_GT(n, 50);
  // Where the interesting code lives.
  const Module* vdso = nullptr;
  for (const auto& m : map.modules())
    if (m.vdso) vdso = &m;
  uint64_t thread_fn = reinterpret_cast<uint64_t>(&sampled_thread);
  int reached_thread_fn = 0, through_vdso = 0, clean_end = 0;
  for (int i = 0; i < n; ++i) {
    const Sample& s = g_samples[i];
    bool saw_fn = false, saw_vdso = false;
    for (size_t k = 0; k < s.frames; ++k) {
      uint64_t pc = s.pcs[k];
      if (pc > thread_fn && pc < thread_fn + 256) saw_fn = true;
      if (vdso && pc >= vdso->start && pc < vdso->end) saw_vdso = true;
    }
    reached_thread_fn += saw_fn;
    if (!saw_fn || s.why != StopReason::EndOfStack) {
      std::string trace;
      for (size_t k = 0; k < s.frames; ++k) {
        const Module* m = map.find(s.pcs[k] - (k ? 1 : 0));
        trace += " " + (m ? m->path.substr(m->path.rfind('/') + 1) : std::string("?")) + "+" +
                 std::to_string(m ? s.pcs[k] - m->bias : s.pcs[k]);
      }
      ADD_FAILURE() << "sample " << i << " stopped (" << stop_reason_name(s.why) << "):" << trace;
    }
    through_vdso += saw_vdso && saw_fn;
    clean_end += s.why == StopReason::EndOfStack;
  }
  RecordProperty("samples", n);
  RecordProperty("through_vdso", through_vdso);
  // Every sample walks out of the handler, through __restore_rt, into the sampled code and up
  // to the thread's start routine and beyond to the end of the stack.
  EXPECT_EQ(reached_thread_fn, n);
  EXPECT_EQ(clean_end, n);
  // The thread spends most of its time inside the vDSO: many samples start there.
  if (vdso) {
    EXPECT_GT(through_vdso, n / 10) << "samples through the vDSO: " << through_vdso << " of " << n;
  }
}

// A function that keeps its return address in rcx from its pop to its `jmp *%rcx` (as libgcc's
// _Unwind_RaiseException ends; tests/fixtures/ra_register.c has the same): its rows say CFA=rsp+0
// and the return address in rcx. A signal there leaves rcx in the signal context only.
extern "C" void ra_in_rcx_spin(long n);
extern "C" const char ra_in_rcx_spin_end[];
asm(".text\n"
    ".globl ra_in_rcx_spin, ra_in_rcx_spin_end\n"
    ".type ra_in_rcx_spin, @function\n"
    "ra_in_rcx_spin:\n"
    ".cfi_startproc\n"
    "  popq %rcx\n"
    ".cfi_adjust_cfa_offset -8\n"
    ".cfi_register %rip, %rcx\n"
    "1: decq %rdi\n"
    "  jnz 1b\n"
    "  jmp *%rcx\n"
    ".cfi_endproc\n"
    "ra_in_rcx_spin_end:\n"
    ".size ra_in_rcx_spin, .-ra_in_rcx_spin\n");

__attribute__((noinline)) void call_ra_in_rcx() {
  ra_in_rcx_spin(20000);
  asm volatile(""); // not a tail call: this frame stays on the stack
}

void* signal_sender(void* target) {
  for (int i = 0; i < kMaxSamples * 8 && g_count.load() < kMaxSamples; ++i) {
    pthread_kill(*static_cast<pthread_t*>(target), SIGPROF);
    usleep(300);
  }
  g_stop = true;
  return nullptr;
}

TEST(SignalUnwind, ThroughAReturnAddressInARegister) {
  ModuleMap map = ModuleMap::for_self();
  map.load_all();
  UnwinderOptions options;
  options.allow_loading = false;
  Unwinder unwinder(map, options);
  // The handler and sample slots of the test above, used again from this thread.
  g_count = 0;
  g_stack = current_thread_stack();
  g_unwinder = &unwinder;
  struct sigaction sa {};
  sa.sa_sigaction = on_sigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGPROF, &sa, nullptr), 0);
  g_stop = false;
  pthread_t self = pthread_self(), sender;
  ASSERT_EQ(pthread_create(&sender, nullptr, signal_sender, &self), 0);
  while (!g_stop.load(std::memory_order_relaxed))
    call_ra_in_rcx();
  pthread_join(sender, nullptr);
  signal(SIGPROF, SIG_IGN);
  g_unwinder = nullptr;

  const uint64_t ra_begin = reinterpret_cast<uint64_t>(&ra_in_rcx_spin);
  const uint64_t ra_end = reinterpret_cast<uint64_t>(ra_in_rcx_spin_end);
  const uint64_t caller = reinterpret_cast<uint64_t>(&call_ra_in_rcx);
  int in_ra = 0, through = 0;
  for (int i = 0; i < g_count.load(std::memory_order_acquire); ++i) {
    const Sample& s = g_samples[i];
    for (size_t k = 1; k + 1 < s.frames; ++k) {
      // In the loop, past the pop: the interrupted frame's return address is in rcx.
      if (s.pcs[k] <= ra_begin || s.pcs[k] >= ra_end) continue;
      ++in_ra;
      if (s.pcs[k + 1] > caller && s.pcs[k + 1] < caller + 64 && s.why == StopReason::EndOfStack)
        ++through;
      else
        ADD_FAILURE() << "sample " << i << ": the frame after ra_in_rcx_spin+"
                      << s.pcs[k] - ra_begin << " is " << std::hex << s.pcs[k + 1]
                      << " (call_ra_in_rcx at " << caller
                      << "), stopped: " << stop_reason_name(s.why);
      break;
    }
  }
  RecordProperty("in_ra", in_ra);
  EXPECT_GE(in_ra, 20); // the thread spends nearly all its time in the loop
  EXPECT_EQ(through, in_ra);
}

} // namespace
} // namespace ehelf
