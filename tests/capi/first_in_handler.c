/* The profiler's scenario: nothing of the unwinder is called before the first signal;
 * a 10 kHz ITIMER_PROF handler unwinds (unw_backtrace, or unw_init_local2 with
 * UNW_INIT_SIGNAL_FRAME + unw_step to the end) while the threads it interrupts loop on
 * malloc/free. Every allocator call is counted, and one made while a handler of ours runs fails
 * the run (malloc is not async-signal-safe: before the fix the first sample built whole tables
 * inside the handler and corrupted the heap or deadlocked).
 *
 *   first_in_handler MODE THREADS [altstack | dlopen LIB PLUGIN]
 *     MODE: backtrace | step
 *     THREADS: worker threads besides main, each taking its first sample in a handler
 *     dlopen: the workers run inside LIB's dlopen_lib_call (loaded after start: its frame must
 *       show in samples), while one more thread loads and unloads PLUGIN in a loop
 *     preload: ehelf_unw_preload() first (ehelf's accelerators), checked to leave a walk from
 *       main unchanged
 * Prints "first-in-handler: N samples, M frames max, 0 allocator calls in handlers" and exits 0,
 * or says what went wrong and exits 1. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#ifndef COUNT_ALLOCATIONS
#define COUNT_ALLOCATIONS 1 /* 0 under sanitizers, which replace the allocator themselves */
#endif

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);
extern void* __libc_memalign(size_t, size_t);

static __thread volatile int t_in_handler;
static atomic_ulong g_bad_calls;
static void count(void) {
  if (t_in_handler) atomic_fetch_add(&g_bad_calls, 1);
}
#if COUNT_ALLOCATIONS
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  count();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void free(void* p) {
  if (p) count();
  __libc_free(p);
}
void* memalign(size_t a, size_t n) {
  count();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  count();
  *out = __libc_memalign(a, n);
  return *out ? 0 : 12;
}
#else
static void __attribute__((unused)) unused_count(void) {
  count();
}
#endif

static int g_step_mode;
static atomic_ulong g_samples;
static atomic_int g_max_frames;
static atomic_int g_stop;
/* dlopen variant: where LIB's function is, and the samples that went through it. */
static unsigned long g_lib_lo, g_lib_hi;
static atomic_ulong g_lib_samples;

static int in_lib(unsigned long pc) {
  return pc - g_lib_lo < g_lib_hi - g_lib_lo;
}

static void on_prof(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)info;
  (void)uc;
  t_in_handler = 1;
  int frames = 0, lib = 0;
  if (!g_step_mode) {
    void* pcs[128];
    frames = unw_backtrace(pcs, 128);
    for (int i = 0; i < frames; ++i)
      lib |= in_lib((unsigned long)pcs[i]);
  } else {
    unw_context_t ctx;
    unw_cursor_t cursor;
    unw_getcontext(&ctx);
    if (unw_init_local2(&cursor, &ctx, UNW_INIT_SIGNAL_FRAME) == 0)
      while (frames < 128 && unw_step(&cursor) > 0) {
        unw_word_t ip = 0;
        ++frames;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) == 0) lib |= in_lib(ip);
      }
  }
  int max = atomic_load(&g_max_frames);
  while (frames > max && !atomic_compare_exchange_weak(&g_max_frames, &max, frames)) {
  }
  atomic_fetch_add(&g_samples, 1);
  if (lib) atomic_fetch_add(&g_lib_samples, 1);
  t_in_handler = 0;
}

/* Installs an alternate signal stack; returns the previous one, which the thread puts back
 * before it exits (sanitizers unmap the stack they installed at thread exit). */
static stack_t use_altstack(void) {
  stack_t ss, old;
  ss.ss_size = 64 * 1024;
  ss.ss_sp = malloc(ss.ss_size);
  ss.ss_flags = 0;
  sigaltstack(&ss, &old);
  return old;
}

static void restore_altstack(stack_t old) {
  stack_t mine;
  if (sigaltstack(NULL, &mine) != 0) return;
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved); /* no handler on the stack being taken away */
  if (old.ss_flags & SS_DISABLE) old.ss_flags = SS_DISABLE;
  sigaltstack(&old, NULL);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  free(mine.ss_sp);
}

static int g_altstack;

static void churn(void) {
  void* keep[64] = {0};
  unsigned x = 12345;
  while (!atomic_load(&g_stop)) {
    for (int i = 0; i < 64; ++i) {
      x = x * 1103515245u + 12345u;
      free(keep[i]);
      keep[i] = malloc(16 + (x >> 20) % 4000);
    }
  }
  for (int i = 0; i < 64; ++i)
    free(keep[i]);
}

static void (*g_lib_call)(void (*)(void));

static void* worker(void* arg) {
  (void)arg;
  stack_t old;
  if (g_altstack) old = use_altstack();
  if (g_lib_call)
    g_lib_call(churn); /* LIB's frame under the churn */
  else
    churn();
  if (g_altstack) restore_altstack(old);
  return NULL;
}

static const char* g_plugin;

static void* load_unload(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    void* h = dlopen(g_plugin, RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: first_in_handler backtrace|step THREADS [altstack | preload | dlopen "
                    "LIB PLUGIN]\n");
    return 2;
  }
  g_step_mode = strcmp(argv[1], "step") == 0;
  int threads = atoi(argv[2]);
  g_altstack = argc > 3 && strcmp(argv[3], "altstack") == 0;
  const int with_dlopen = argc > 5 && strcmp(argv[3], "dlopen") == 0;
  stack_t old_main;
  if (g_altstack) old_main = use_altstack();
  if (argc > 3 && strcmp(argv[3], "preload") == 0) {
#ifdef EHELF_UNW_PRELOAD
    void* pcs[2][64];
    int n[2];
    for (int k = 0; k < 2; ++k) { /* the same walk before and after */
      if (k == 1 && ehelf_unw_preload() != 0) {
        fprintf(stderr, "ehelf_unw_preload failed\n");
        return 1;
      }
      n[k] = unw_backtrace(pcs[k], 64);
    }
    /* The callers' frames (the compiler may unroll the loop: the first pc may differ). */
    if (n[0] < 3 || n[0] != n[1] || memcmp(pcs[0] + 1, pcs[1] + 1, (n[0] - 1) * sizeof pcs[0][0])) {
      fprintf(stderr, "walks differ after ehelf_unw_preload: %d and %d frames\n", n[0], n[1]);
      return 1;
    }
#endif
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | (g_altstack ? SA_ONSTACK : 0);
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 100}, {0, 100}}; /* 10 kHz of CPU time */
  setitimer(ITIMER_PROF, &it, NULL);

  pthread_t tids[16], loader;
  if (with_dlopen) { /* after the timer started: the library is new to the unwinder */
    void* lib = dlopen(argv[4], RTLD_NOW);
    g_lib_call = lib ? (void (*)(void (*)(void)))dlsym(lib, "dlopen_lib_call") : NULL;
    if (!g_lib_call) {
      fprintf(stderr, "cannot load %s\n", argv[4]);
      return 2;
    }
    g_lib_lo = (unsigned long)g_lib_call;
    g_lib_hi = g_lib_lo + 64; /* the call's return address lies in its first bytes */
    g_plugin = argv[5];
    pthread_create(&loader, NULL, load_unload, NULL);
  }
  if (threads > 16) threads = 16;
  for (int i = 0; i < threads; ++i)
    pthread_create(&tids[i], NULL, worker, NULL);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    void* p = malloc(100);
    free(p);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 300000000L);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < threads; ++i)
    pthread_join(tids[i], NULL);
  if (with_dlopen) pthread_join(loader, NULL);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  if (g_altstack) restore_altstack(old_main);

  unsigned long bad = atomic_load(&g_bad_calls), samples = atomic_load(&g_samples);
  printf("first-in-handler: %lu samples, %d frames max, %lu allocator calls in handlers\n", samples,
         atomic_load(&g_max_frames), bad);
  if (with_dlopen)
    printf("first-in-handler: %lu samples through the library loaded after start\n",
           atomic_load(&g_lib_samples));
  if (bad != 0 || samples == 0 || atomic_load(&g_max_frames) < 3) return 1;
  if (with_dlopen && threads > 0 && atomic_load(&g_lib_samples) == 0) return 1;
  return 0;
}
