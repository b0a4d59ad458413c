// _Unwind_ForcedUnwind called directly, with a stop function that prints each frame's
// function (by _Unwind_FindEnclosingFunction, named through dladdr) and the CFA's distance from
// main's, stopping (longjmp) at main. Destructors and catch (...) blocks see the unwind.
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unwind.h>

static jmp_buf g_back;
static uintptr_t g_main_cfa;
static int g_frames;

static const char* name_of(void* pc) {
  Dl_info info;
  if (pc && dladdr(pc, &info) && info.dli_sname) return info.dli_sname;
  return "?";
}

static _Unwind_Reason_Code stop(int, _Unwind_Action actions, _Unwind_Exception_Class,
                                _Unwind_Exception*, _Unwind_Context* ctx, void*) {
  const uintptr_t cfa = _Unwind_GetCFA(ctx);
  void* fn = _Unwind_FindEnclosingFunction(reinterpret_cast<void*>(_Unwind_GetIP(ctx)));
  const char* name = name_of(fn);
  // Only the program's own frames: the unwinder's differ (libgcc's or ours).
  if (std::strstr(name, "level") || std::strstr(name, "forced"))
    std::printf("  stop: %s%s cfa main-%ld\n", name, (actions & _UA_END_OF_STACK) ? " end" : "",
                long(g_main_cfa - cfa));
  if (++g_frames > 100 || std::strcmp(name, "main") == 0 || (actions & _UA_END_OF_STACK))
    std::longjmp(g_back, 1);
  return _URC_NO_REASON;
}

struct Noisy {
  int n;
  ~Noisy() { std::printf("  ~Noisy %d\n", n); }
};

static _Unwind_Exception g_exc;

extern "C" __attribute__((noinline)) void level2() {
  Noisy n{2};
  std::memset(&g_exc, 0, sizeof g_exc);
  g_exc.exception_class = 0x4548454c46000000; // not C++'s
  _Unwind_Reason_Code r = _Unwind_ForcedUnwind(&g_exc, stop, nullptr);
  std::printf("  returned %d\n", r);
}

extern "C" __attribute__((noinline)) void level1() {
  Noisy n{1};
  try {
    level2();
  } catch (...) {
    std::puts("  catch (...) in level1, rethrow");
    throw;
  }
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  g_main_cfa = reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) + 16;
  if (setjmp(g_back) == 0) {
    level1();
    std::puts("not reached");
  }
  std::puts("back in main");
  return 0;
}
