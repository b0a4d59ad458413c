/* The first unwind of a process: a chain of DEPTH real frames (no tail calls), then one
 * unw_backtrace (or, with -DUSE_STEP, unw_getcontext + unw_init_local + unw_step to the end),
 * timed with CLOCK_MONOTONIC, then a second one. Prints "frames first_ns second_ns".
 * With DEPTH 0 on the command line it unwinds nothing (the process's cost without the call).
 * Built once against libehelf-unwind and once against libunwind by first_call.py. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int unwind(void) {
#ifdef USE_STEP
  unw_context_t ctx;
  unw_cursor_t cursor;
  int n = 0;
  unw_getcontext(&ctx);
  if (unw_init_local(&cursor, &ctx) != 0) return -1;
  while (unw_step(&cursor) > 0) ++n;
  return n + 1;
#else
  void* pcs[256];
  return unw_backtrace(pcs, 256);
#endif
}

static volatile int sink;

__attribute__((noinline)) static int chain(int depth) {
  if (depth > 0) {
    int r = chain(depth - 1);
    sink = r; /* work after the call: no tail call */
    return r + 1;
  }
  long t0 = now_ns();
  int frames = unwind();
  long t1 = now_ns();
  (void)unwind();
  long t2 = now_ns();
  printf("%d %ld %ld\n", frames, t1 - t0, t2 - t1);
  return 0;
}

int main(int argc, char** argv) {
  int depth = argc > 1 ? atoi(argv[1]) : 20;
  if (depth <= 0) return 0;
  return chain(depth) < 0;
}
