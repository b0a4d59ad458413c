// unw_get_proc_info on C++ frames: a function with a try block has an LSDA and a personality
// routine, which libunwind gives as `handler` (C++ runtimes and crash reporters read it; the
// CIE points to it indirectly, through DW.ref.__gxx_personality_v0, which the loader relocates).
// Prints one line per frame kind, the same for any libunwind-compatible library:
//   FRAME with_try lsda=1 handler=__gxx_personality_v0
//   FRAME plain lsda=0 handler=0
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>

#include <cstdio>
#include <stdexcept>

namespace {

volatile int sink;

// Describes the proc info of the frame `up` frames above this function's caller.
__attribute__((noinline)) void describe(const char* label, int up) {
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  unw_init_local(&cursor, &context);
  for (int i = 0; i <= up; ++i)
    if (unw_step(&cursor) <= 0) {
      std::printf("FRAME %s: unw_step failed\n", label);
      return;
    }
  unw_proc_info_t info;
  if (unw_get_proc_info(&cursor, &info) != 0) {
    std::printf("FRAME %s: unw_get_proc_info failed\n", label);
    return;
  }
  void* personality = dlsym(RTLD_DEFAULT, "__gxx_personality_v0");
  const char* handler = info.handler == 0 ? "0"
                        : info.handler == reinterpret_cast<unw_word_t>(personality)
                            ? "__gxx_personality_v0"
                            : "other";
  std::printf("FRAME %s lsda=%d handler=%s\n", label, info.lsda != 0, handler);
}

__attribute__((noinline)) void with_try() {
  try {
    describe("with_try", 0);
    if (sink == 42) throw std::runtime_error("never");
  } catch (const std::exception&) {
    sink = 1;
  }
}

__attribute__((noinline)) void plain() {
  describe("plain", 0);
  sink = sink + 1;
}

} // namespace

int main() {
  with_try();
  plain();
  return 0;
}
