/* How much stack the C library's walks take, measured on an alternate signal stack painted with
 * a pattern (the lowest byte the walk overwrote), built unchanged against the real libunwind and
 * against ehelf's:
 *
 *   USE MODE first=N later=N     bytes a walk in a SIGUSR1 handler takes beyond an empty
 *                                handler's, on the first walk of its kind and on later ones
 *                                (MODE: backtrace = unw_backtrace; cursor = unw_getcontext,
 *                                unw_init_local and unw_step to the end). Link with -z now: a
 *                                lazily bound first call costs the dynamic linker's frames too.
 *   SMALL MODE frames=N          the same walk on an 8 KiB alternate stack (the legacy
 *                                SIGSTKSZ crash handlers use): it must not overflow it and must
 *                                reach main
 *
 * Usage: stack_use measure|small
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAINT 0xa5
#define MEASURE_SIZE (256 * 1024)
#define SMALL_SIZE 8192

static volatile int g_mode; /* 0: empty handler, 1: unw_backtrace, 2: cursor walk */
static volatile int g_frames;

/* Every mode has the same locals, touched, so that the empty handler's depth counts them. */
static void walk(void) {
  void* pcs[64];
  unw_context_t context;
  unw_cursor_t cursor;
  memset(pcs, 0, sizeof pcs);
  memset(&context, 0, sizeof context);
  memset(&cursor, 0, sizeof cursor);
  __asm__ volatile("" ::"r"(pcs), "r"(&context), "r"(&cursor) : "memory");
  if (g_mode == 1) {
    g_frames = unw_backtrace(pcs, 64);
  } else if (g_mode == 2) {
    int frames = 0;
    unw_getcontext(&context);
    if (unw_init_local(&cursor, &context) == 0) do
        ++frames;
      while (frames < 64 && unw_step(&cursor) > 0);
    g_frames = frames;
  }
}

static void on_usr1(int sig) {
  (void)sig;
  walk();
}

static void use_stack(void* stack, size_t size) {
  stack_t ss = {.ss_sp = stack, .ss_size = size, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) {
    perror("sigaltstack");
    exit(1);
  }
}

/* Bytes used below the top of `stack` by one SIGUSR1 with mode `mode`. */
static size_t depth(unsigned char* stack, size_t size, int mode) {
  memset(stack, PAINT, size);
  g_mode = mode;
  raise(SIGUSR1);
  size_t untouched = 0;
  while (untouched < size && stack[untouched] == PAINT)
    ++untouched;
  return size - untouched;
}

__attribute__((noinline)) static int measure(void) {
  unsigned char* stack = malloc(MEASURE_SIZE);
  if (!stack) return 1;
  use_stack(stack, MEASURE_SIZE);
  const size_t empty = depth(stack, MEASURE_SIZE, 0);
  static const char* const names[] = {"", "backtrace", "cursor"};
  for (int mode = 1; mode <= 2; ++mode) {
    const size_t first = depth(stack, MEASURE_SIZE, mode);
    size_t later = 0;
    for (int i = 0; i < 4; ++i) {
      const size_t d = depth(stack, MEASURE_SIZE, mode);
      if (d > later) later = d;
    }
    printf("USE %s first=%zu later=%zu\n", names[mode], first - empty, later - empty);
  }
  return 0;
}

__attribute__((noinline)) static int small(void) {
  static unsigned char stack[SMALL_SIZE];
  use_stack(stack, sizeof stack);
  static const char* const names[] = {"", "backtrace", "cursor"};
  for (int mode = 1; mode <= 2; ++mode) {
    g_frames = 0;
    g_mode = mode;
    raise(SIGUSR1);
    printf("SMALL %s frames=%d\n", names[mode], g_frames);
  }
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  if (argc == 2 && strcmp(argv[1], "measure") == 0) return measure();
  if (argc == 2 && strcmp(argv[1], "small") == 0) return small();
  fprintf(stderr, "usage: stack_use measure|small\n");
  return 2;
}
