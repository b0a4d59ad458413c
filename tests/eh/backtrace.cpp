// _Unwind_Backtrace against glibc's backtrace() (which always runs libgcc_s's unwinder: glibc
// dlopens libgcc_s and calls it directly), and _Unwind_Find_FDE, _Unwind_GetCFA and
// _Unwind_FindEnclosingFunction against libgcc_s's own (dlvsym), frame by frame. Prints the
// comparison's verdicts and the frame count only: the addresses differ from run to run.
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <execinfo.h>
#include <unwind.h>

struct Bases {
  void* tbase;
  void* dbase;
  void* func;
};
extern "C" const void* _Unwind_Find_FDE(void* pc, Bases* bases);

struct Frames {
  void* ip[128];
  unsigned long cfa[128];
  int n = 0;
};

using GetIP = _Unwind_Ptr (*)(_Unwind_Context*);
using GetCFA = _Unwind_Word (*)(_Unwind_Context*);
using Backtrace = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
using FindFDE = const void* (*)(void*, Bases*);
using FindEnclosing = void* (*)(void*);

static GetIP g_gcc_get_ip;
static GetCFA g_gcc_get_cfa;

static _Unwind_Reason_Code ours(_Unwind_Context* ctx, void* arg) {
  auto* f = static_cast<Frames*>(arg);
  if (f->n == 128) return _URC_END_OF_STACK;
  f->ip[f->n] = reinterpret_cast<void*>(_Unwind_GetIP(ctx));
  f->cfa[f->n++] = _Unwind_GetCFA(ctx);
  return _URC_NO_REASON;
}

static _Unwind_Reason_Code theirs(_Unwind_Context* ctx, void* arg) {
  auto* f = static_cast<Frames*>(arg);
  if (f->n == 128) return _URC_END_OF_STACK;
  f->ip[f->n] = reinterpret_cast<void*>(g_gcc_get_ip(ctx));
  f->cfa[f->n++] = g_gcc_get_cfa(ctx);
  return _URC_NO_REASON;
}

static int g_bad = 0;
static void check(bool ok, const char* what, int i) {
  if (!ok) {
    std::printf("MISMATCH %s at frame %d\n", what, i);
    g_bad = 1;
  }
}

__attribute__((noinline)) void compare(void* gcc) {
  auto gcc_backtrace = reinterpret_cast<Backtrace>(dlvsym(gcc, "_Unwind_Backtrace", "GCC_3.3"));
  auto gcc_find_fde = reinterpret_cast<FindFDE>(dlvsym(gcc, "_Unwind_Find_FDE", "GCC_3.0"));
  auto gcc_enclosing =
      reinterpret_cast<FindEnclosing>(dlvsym(gcc, "_Unwind_FindEnclosingFunction", "GCC_3.3"));
  Frames a, b;
  void* glibc[128];
  // One line: the three walks start at the same frame (this one) at nearby pcs.
  _Unwind_Backtrace(ours, &a);
  gcc_backtrace(theirs, &b);
  int n = backtrace(glibc, 128);
  // glibc drops libgcc's last frame (pc 0, above _start) and its own first (in backtrace()).
  int ours_n = a.n;
  if (ours_n > 1 && a.ip[ours_n - 1] == nullptr) --ours_n;
  // Under AddressSanitizer backtrace() is its interceptor's (its own unwinder): no oracle.
  const bool asan = dlsym(RTLD_DEFAULT, "__asan_init") != nullptr;
  if (asan) n = ours_n;
  std::printf("frames: ours %d, libgcc %d, backtrace() %d\n", ours_n, b.n - 1, n);
  check(a.n == b.n, "frame count against libgcc", a.n);
  check(ours_n == n, "frame count against backtrace()", n);
  for (int i = 1; i < a.n && i < b.n; ++i) {
    check(a.ip[i] == b.ip[i], "ip", i);
    check(a.cfa[i] == b.cfa[i], "cfa", i);
    if (!asan && i < ours_n && i < n) check(a.ip[i] == glibc[i], "ip against backtrace()", i);
    if (!a.ip[i]) continue;
    Bases x{}, y{};
    const void* fx = _Unwind_Find_FDE(static_cast<char*>(a.ip[i]) - 1, &x);
    const void* fy = gcc_find_fde(static_cast<char*>(a.ip[i]) - 1, &y);
    check(fx == fy, "fde", i);
    check(x.func == y.func && x.tbase == y.tbase && x.dbase == y.dbase, "bases", i);
    check(_Unwind_FindEnclosingFunction(a.ip[i]) == gcc_enclosing(a.ip[i]), "enclosing", i);
  }
  // A pc no FDE covers.
  Bases z{};
  check(_Unwind_Find_FDE(nullptr, &z) == gcc_find_fde(nullptr, &z), "fde of pc 0", 0);
}

__attribute__((noinline)) void level(int depth, void* gcc) {
  if (depth == 0)
    compare(gcc);
  else
    level(depth - 1, gcc);
  asm volatile(""); // not a tail call
}

int main() {
  void* gcc = dlopen("libgcc_s.so.1", RTLD_NOW);
  g_gcc_get_ip = reinterpret_cast<GetIP>(dlvsym(gcc, "_Unwind_GetIP", "GCC_3.0"));
  g_gcc_get_cfa = reinterpret_cast<GetCFA>(dlvsym(gcc, "_Unwind_GetCFA", "GCC_3.3"));
  level(5, gcc);
  std::puts(g_bad ? "backtrace: differences" : "backtrace: same frames, FDEs and CFAs");
  return g_bad;
}
