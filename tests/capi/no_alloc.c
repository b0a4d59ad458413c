/* Checks that local unwinding allocates nothing once initialised: malloc, calloc, realloc, free
 * (and the aligned variants) are replaced here by counting wrappers around glibc's __libc_*
 * functions, and the count must not change across full walks (unw_getcontext, unw_init_local,
 * unw_step to the end with unw_get_reg, unw_is_signal_frame and unw_get_proc_info on every frame,
 * then unw_backtrace), in main and in a signal handler, once a first walk has initialised the
 * library, and in other threads: one whose first walk was a cursor walk (so its first
 * unw_backtrace, which sets up the thread's rule cache, is measured), and one whose first call
 * was unw_backtrace. The process's first walk and a thread's first unw_backtrace must not allocate
 * either (the same program linked with libunwind is run for reference only). Prints
 * "no-alloc: ok" or what allocated; exits non-zero on failure. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);
extern void* __libc_memalign(size_t, size_t);

static volatile unsigned long g_calls;

void* malloc(size_t n) {
  g_calls++;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  g_calls++;
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  g_calls++;
  return __libc_realloc(p, n);
}
void free(void* p) {
  if (p) g_calls++;
  __libc_free(p);
}
void* memalign(size_t a, size_t n) {
  g_calls++;
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  g_calls++;
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  g_calls++;
  *out = __libc_memalign(a, n);
  return *out ? 0 : 12 /* ENOMEM */;
}

static volatile int sink;
static int g_frames;

__attribute__((noinline)) static int cursor_walk(void) {
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) != 0) return -1;
  int frames = 0;
  do {
    unw_word_t ip, sp;
    unw_proc_info_t pi;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    unw_get_reg(&cursor, UNW_REG_SP, &sp);
    unw_get_reg(&cursor, UNW_X86_64_RBX, &ip);
    unw_is_signal_frame(&cursor);
    unw_get_proc_info(&cursor, &pi);
    ++frames;
  } while (unw_step(&cursor) > 0 && frames < 256);
  return frames;
}

enum { CURSOR = 1, BACKTRACE = 2, BOTH = CURSOR | BACKTRACE };

/* Returns the frame count (of the cursor walk if there is one), or -1. */
__attribute__((noinline)) static int walk(int what) {
  int frames = 0;
  if (what & CURSOR) frames = cursor_walk();
  if (frames < 0 || !(what & BACKTRACE)) return frames;
  void* pcs[256];
  int n = unw_backtrace(pcs, 256);
  if (n <= 0) return -1;
  return what & CURSOR ? frames : n;
}

__attribute__((noinline)) static int nested(int depth, int what) {
  int r = depth > 0 ? nested(depth - 1, what) : walk(what);
  sink++;
  return r;
}

static unsigned long g_handler_delta = ~0ul;
static unsigned long g_thread_delta = ~0ul;
static int g_thread_frames;

/* Another thread: its first walk, with the cursor only, asks for the thread's stack bounds
 * (which allocates); the second, its first unw_backtrace included, must not allocate. main only
 * waits in pthread_join meanwhile. */
static void* thread_main(void* arg) {
  (void)arg;
  if (nested(1, CURSOR) < 0) return NULL;
  unsigned long before = g_calls;
  g_thread_frames = nested(4, BOTH);
  g_thread_delta = g_calls - before;
  return NULL;
}

static unsigned long g_bt_first_delta = ~0ul;
static unsigned long g_bt_delta = ~0ul;
static int g_bt_frames;

/* A thread whose first call is unw_backtrace: that one may allocate (the stack bounds), the
 * next ones must not. */
static void* backtrace_first_main(void* arg) {
  (void)arg;
  unsigned long before = g_calls;
  if (nested(1, BACKTRACE) < 0) return NULL;
  g_bt_first_delta = g_calls - before;
  before = g_calls;
  g_bt_frames = nested(4, BACKTRACE);
  g_bt_delta = g_calls - before;
  return NULL;
}

static int run_thread(void* (*body)(void*)) {
  pthread_t thread;
  return pthread_create(&thread, NULL, body, NULL) == 0 && pthread_join(thread, NULL) == 0;
}

static void on_signal(int sig) {
  (void)sig;
  unsigned long before = g_calls;
  int frames = nested(3, BOTH);
  g_handler_delta = g_calls - before;
  g_frames = frames;
}

int main(void) {
  unsigned long before = g_calls;
  if (nested(2, BOTH) < 0) { /* the process's first walk: ehelf's allocates nothing either */
    printf("no-alloc: walk failed\n");
    return 1;
  }
  const unsigned long first_delta = g_calls - before;
  printf("no-alloc: first walk (initialisation): %lu allocator calls\n", first_delta);
  before = g_calls;
  int frames = nested(5, BOTH);
  unsigned long delta = g_calls - before;
  printf("no-alloc: main walk of %d frames: %lu allocator calls\n", frames, delta);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  raise(SIGUSR1);
  printf("no-alloc: signal-handler walk of %d frames: %lu allocator calls\n", g_frames,
         g_handler_delta);

  if (!run_thread(thread_main) || !run_thread(backtrace_first_main)) {
    printf("no-alloc: no thread\n");
    return 1;
  }
  printf("no-alloc: second walk of a thread, %d frames: %lu allocator calls\n", g_thread_frames,
         g_thread_delta);
  printf("no-alloc: a thread's first unw_backtrace (stack bounds): %lu allocator calls\n",
         g_bt_first_delta);
  printf("no-alloc: its second, %d frames: %lu allocator calls\n", g_bt_frames, g_bt_delta);

  int ok = first_delta == 0 && g_bt_first_delta == 0 && frames > 5 && delta == 0 && g_frames > 5 &&
           g_handler_delta == 0 && g_thread_frames > 4 && g_thread_delta == 0 && g_bt_frames > 4 &&
           g_bt_delta == 0;
  printf("no-alloc: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
