// Peers every binary has: the frame-pointer walk (the floor), libgcc's _Unwind_Backtrace and
// glibc's backtrace() (which calls libgcc's through dlopen), and the reference walk.
#include <dlfcn.h>
#include <pthread.h>
#include <unwind.h>

#include "peer.hpp"

namespace bench {

void thread_stack(uint64_t& lo, uint64_t& hi) {
  pthread_attr_t attr;
  void* addr = nullptr;
  size_t size = 0;
  lo = hi = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
    lo = reinterpret_cast<uint64_t>(addr);
    hi = lo + size;
  }
  pthread_attr_destroy(&attr);
}

namespace {

// ---- frame-pointer walk ----------------------------------------------------------------------
uint64_t g_stack_lo, g_stack_hi;

std::string fp_init() {
  thread_stack(g_stack_lo, g_stack_hi);
  return g_stack_hi ? "" : "no stack bounds";
}

// Follows rbp: [rbp] = caller's rbp, [rbp + 8] = return address. Bounded to the thread's stack
// and to growing rbp, so it stops (rather than faults) where a frame without a frame pointer
// left rbp holding anything else.
__attribute__((noinline)) size_t fp_once(uint64_t* pcs, size_t max, bool) {
  uint64_t regs[17];
  ehelf_capture_context(regs);
  size_t n = 0;
  pcs[n++] = regs[16];
  uint64_t fp = regs[6], lo = regs[7], hi = g_stack_hi;
  while (n < max) {
    if (fp < lo || fp > hi - 16 || (fp & 7)) break;
    const uint64_t* frame = reinterpret_cast<const uint64_t*>(fp);
    uint64_t next = frame[0], ra = frame[1];
    if (ra == 0) break;
    pcs[n++] = ra;
    if (next <= fp) break;
    fp = next;
  }
  asm volatile("" ::: "memory");
  return n;
}

// ---- libgcc ----------------------------------------------------------------------------------
using BacktraceFn = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
using GetIpFn = uintptr_t (*)(_Unwind_Context*); // _Unwind_Ptr (not in LLVM's unwind.h)
BacktraceFn g_backtrace;
GetIpFn g_get_ip;

std::string gcc_init() {
  if (g_backtrace) return "";
  void* h = dlopen("libgcc_s.so.1", RTLD_NOW);
  if (!h) return "dlopen libgcc_s.so.1 failed";
  g_backtrace = reinterpret_cast<BacktraceFn>(dlsym(h, "_Unwind_Backtrace"));
  g_get_ip = reinterpret_cast<GetIpFn>(dlsym(h, "_Unwind_GetIP"));
  return g_backtrace && g_get_ip ? "" : "libgcc_s has no _Unwind_Backtrace";
}

struct GccWalk {
  uint64_t* pcs;
  size_t n, max;
};

_Unwind_Reason_Code gcc_frame(_Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<GccWalk*>(arg);
  if (w->n == w->max) return _URC_END_OF_STACK;
  uintptr_t ip = g_get_ip(ctx);
  // libgcc also reports the outermost frame (clone3's caller, whose return address is
  // undefined) with ip 0, which no other walk reports: not a frame.
  if (ip == 0) return _URC_END_OF_STACK;
  w->pcs[w->n++] = ip;
  return _URC_NO_REASON;
}

__attribute__((noinline)) size_t gcc_once(uint64_t* pcs, size_t max, bool) {
  GccWalk w{pcs, 0, max};
  g_backtrace(gcc_frame, &w);
  asm volatile("" ::: "memory");
  return w.n;
}

// ---- glibc backtrace() -----------------------------------------------------------------------
// Looked up in libc.so.6 itself: libunwind.so defines a backtrace() too, which would otherwise
// win the symbol lookup in the binary that links libunwind.
using GlibcBacktraceFn = int (*)(void**, int);
GlibcBacktraceFn g_glibc_backtrace;

__attribute__((noinline)) size_t glibc_once(uint64_t* pcs, size_t max, bool) {
  int n = g_glibc_backtrace(reinterpret_cast<void**>(pcs), int(max));
  asm volatile("" ::: "memory");
  return n < 0 ? 0 : size_t(n);
}

std::string glibc_init() {
  void* h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return "libc.so.6 not loaded";
  g_glibc_backtrace = reinterpret_cast<GlibcBacktraceFn>(dlsym(h, "backtrace"));
  if (!g_glibc_backtrace) return "libc.so.6 has no backtrace";
  uint64_t pcs[4];
  glibc_once(pcs, 4, true); // backtrace() dlopens libgcc_s on first use: not in the timings
  return "";
}

} // namespace

void add_fp_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = "frame-pointer walk";
  p.cold_means = "no cache";
  p.init = fp_init;
  p.once = fp_once;
  peers.push_back(p);
}

void add_gcc_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = kReferencePeer;
  p.cold_means = "no flush API (libgcc 12 keeps only an 8-entry module cache, no per-pc cache)";
  p.init = gcc_init;
  p.once = gcc_once;
  peers.push_back(p);
  p.name = "glibc backtrace()";
  p.cold_means = "no flush API (it calls libgcc's _Unwind_Backtrace)";
  p.init = glibc_init;
  p.once = glibc_once;
  peers.push_back(p);
}

} // namespace bench
