/* A small program written against libunwind's local API, built unchanged against the real
 * libunwind (cc libunwind_user.c -lunwind) and against ehelf's (pkg-config ehelf-unwind). It walks
 * a few nested calls (one through libc's qsort), from inside a SIGUSR1 handler through the
 * signal frame, and on a coroutine's stack (makecontext), and reads a caller's callee-saved
 * registers; it prints each frame so that two builds can be compared line by line:
 *
 *   WALK qsort #N ip=MODULE+OFF sp=+DELTA name=SYMBOL+OFF start=MODULE+OFF sig=0|1
 *   BT qsort #N MODULE+OFF
 *
 * Addresses are printed relative to their module (the two builds load different libraries, so
 * absolute addresses differ), the program itself is "main", and the unwinding library, whichever
 * it is, is "unwinder". Stack pointers are printed relative to the first frame's.
 *
 * Then unw_backtrace runs in several threads at once, while the main thread interrupts them
 * with signals whose handler calls unw_backtrace too (possibly in the middle of the interrupted
 * thread's own call): every list must equal the thread's cursor walk from the same place, and
 * every handler's list must reach the thread's outermost frame. It prints one thread's first
 * unw_backtrace list,
 *
 *   BT threads #N MODULE+OFF
 *
 * and "MT ..." lines that say whether the checks held (details go to stderr).
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "describe.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

static void print_walk(const char* label, unw_cursor_t* cursor) {
  unw_word_t sp0 = 0;
  int after_signal = 1;
  for (int i = 0; i < 64; ++i) {
    unw_word_t ip = 0, sp = 0, off = 0;
    unw_get_reg(cursor, UNW_REG_IP, &ip);
    unw_get_reg(cursor, UNW_REG_SP, &sp);
    if (after_signal) sp0 = sp;
    char name[256];
    if (unw_get_proc_name(cursor, name, sizeof name, &off) != 0) {
      strcpy(name, "?");
      off = 0;
    }
    unw_proc_info_t pi;
    char where[300], start[300];
    describe(ip, where, sizeof where);
    if (unw_get_proc_info(cursor, &pi) == 0) describe(pi.start_ip, start, sizeof start);
    else strcpy(start, "?");
    after_signal = unw_is_signal_frame(cursor) > 0;
    printf("WALK %s #%d ip=%s sp=+%#lx name=%s+%#lx start=%s sig=%d\n", label, i, where,
           (unsigned long)(sp - sp0), name, (unsigned long)off, start, after_signal);
    int r = unw_step(cursor);
    if (r < 0) printf("WALK %s step error: %s\n", label, unw_strerror(r));
    if (r <= 0) break;
  }
}

static void print_backtrace(const char* label) {
  void* frames[64];
  int n = unw_backtrace(frames, 64);
  for (int i = 0; i < n; ++i) {
    char where[300];
    describe((unw_word_t)frames[i], where, sizeof where);
    printf("BT %s #%d %s\n", label, i, where);
  }
}

static volatile int sink;

__attribute__((noinline)) static void walk_here(const char* label) {
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) != 0) {
    printf("WALK %s init failed\n", label);
    return;
  }
  print_walk(label, &cursor);
  print_backtrace(label);
  sink++;
}

/* ---- nested calls through qsort ---- */

__attribute__((noinline)) static void level3(void) {
  walk_here("qsort");
  sink++;
}

static int compare(const void* a, const void* b) {
  static int done;
  if (!done) {
    done = 1;
    level3();
  }
  return *(const int*)a - *(const int*)b;
}

__attribute__((noinline)) static void level2(void) {
  int v[4] = {4, 2, 3, 1};
  qsort(v, 4, sizeof v[0], compare);
  sink += v[0];
}

__attribute__((noinline)) static void level1(void) {
  level2();
  sink++;
}

/* ---- a walk from a signal handler, through the signal frame ---- */

static void on_sigusr1(int sig) {
  (void)sig;
  walk_here("signal");
  sink++;
}

__attribute__((noinline)) static void signal_level1(void) {
  raise(SIGUSR1);
  sink++;
}

/* ---- callee-saved registers of a caller, restored by the walk ---- */

__attribute__((noinline)) static void print_caller_registers(void) {
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  unw_init_local(&cursor, &context);
  static const struct {
    const char* name;
    int reg;
  } regs[] = {{"rbx", UNW_X86_64_RBX}, {"r12", UNW_X86_64_R12}, {"r13", UNW_X86_64_R13},
              {"r14", UNW_X86_64_R14}, {"r15", UNW_X86_64_R15}};
  do {
    char name[256];
    unw_word_t off;
    if (unw_get_proc_name(&cursor, name, sizeof name, &off) != 0 || strcmp(name, "regs_outer"))
      continue;
    printf("REGS regs_outer");
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; ++i) {
      unw_word_t v = 0;
      int r = unw_get_reg(&cursor, regs[i].reg, &v);
      printf(" %s=%#lx%s", regs[i].name, (unsigned long)v, r ? "(error)" : "");
    }
    printf("\n");
  } while (unw_step(&cursor) > 0);
  sink++;
}

/* Clobbers the callee-saved registers, so its prologue saves them and its CFI says where. */
__attribute__((noinline)) static void regs_inner(void) {
  __asm__ volatile("xor %%ebx, %%ebx\n\txor %%r12d, %%r12d\n\txor %%r13d, %%r13d\n\t"
                   "xor %%r14d, %%r14d\n\txor %%r15d, %%r15d" ::: "rbx", "r12", "r13", "r14",
                   "r15");
  print_caller_registers();
  sink++;
}

/* Holds known values in the callee-saved registers across the call. */
__attribute__((noinline)) static void regs_outer(void) {
  register unsigned long rbx __asm__("rbx") = 0xb0b0;
  register unsigned long r12 __asm__("r12") = 0x1212;
  register unsigned long r13 __asm__("r13") = 0x1313;
  register unsigned long r14 __asm__("r14") = 0x1414;
  register unsigned long r15 __asm__("r15") = 0x1515;
  __asm__ volatile("" : "+r"(rbx), "+r"(r12), "+r"(r13), "+r"(r14), "+r"(r15));
  regs_inner();
  __asm__ volatile("" ::"r"(rbx), "r"(r12), "r"(r13), "r"(r14), "r"(r15));
}

/* ---- a walk on a coroutine's stack (makecontext), outside the thread's stack ---- */

static ucontext_t g_main_context, g_coroutine_context;
static char g_coroutine_stack[128 * 1024] __attribute__((aligned(16)));

__attribute__((noinline)) static void coroutine_level(void) {
  walk_here("coroutine");
  sink++;
}

static void coroutine_entry(void) {
  coroutine_level();
  sink++;
}

static void run_coroutine(void) {
  getcontext(&g_coroutine_context);
  g_coroutine_context.uc_stack.ss_sp = g_coroutine_stack;
  g_coroutine_context.uc_stack.ss_size = sizeof g_coroutine_stack;
  g_coroutine_context.uc_link = &g_main_context;
  makecontext(&g_coroutine_context, coroutine_entry, 0);
  swapcontext(&g_main_context, &g_coroutine_context);
}

/* ---- unw_backtrace from several threads at once, and from signal handlers interrupting it ---- */

#define MT_THREADS 4
#define MT_CALLS 2000 /* unw_backtrace calls per thread, at least */
#define MT_REPEAT 8   /* per cursor walk */
#define MT_SIGNALS 20 /* signal-handler walks per thread, at least */
#define MT_DEPTHS 4   /* recursion depths the threads alternate between */
#define MT_MAX 64

struct mt_thread {
  pthread_t thread;
  void* first[MT_MAX]; /* the first unw_backtrace list, printed */
  int first_count;
  void* outermost; /* the outermost frame's pc, which every list ends with */
  int mismatches;
  volatile int signal_walks, signal_failures;
};

static struct mt_thread g_mt[MT_THREADS];
static __thread struct mt_thread* t_mt;
static pthread_barrier_t g_mt_barrier;

/* The pcs of the cursor walk from this function's caller on. */
__attribute__((noinline)) static int cursor_pcs(void** out, int max) {
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) != 0) return 0;
  int n = 0;
  while (n < max && unw_step(&cursor) > 0) {
    unw_word_t ip = 0;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    out[n++] = (void*)ip;
  }
  return n;
}

static void mt_on_signal(int sig) {
  (void)sig;
  struct mt_thread* t = t_mt;
  if (!t) return;
  void* pcs[MT_MAX];
  int n = unw_backtrace(pcs, MT_MAX);
  t->signal_walks++;
  if (n < 3 || pcs[n - 1] != t->outermost) t->signal_failures++;
}

/* Walks the cursor, then compares unw_backtrace's lists with it, from the caller on (the first
 * pcs differ: they are the two call sites here). Returns the number of unw_backtrace calls. */
__attribute__((noinline)) static int mt_collect(struct mt_thread* t) {
  void* want[MT_MAX];
  int want_count = cursor_pcs(want, MT_MAX);
  for (int k = 0; k < MT_REPEAT; ++k) {
    void* pcs[MT_MAX];
    int n = unw_backtrace(pcs, MT_MAX);
    if (!t->first_count) {
      memcpy(t->first, pcs, sizeof pcs);
      t->first_count = n;
    }
    if (n == want_count && n > 1 && memcmp(pcs + 1, want + 1, (n - 1) * sizeof pcs[0]) == 0)
      continue;
    if (t->mismatches++ == 0)
      fprintf(stderr, "MT thread %d: unw_backtrace gave %d frames, the cursor %d\n",
              (int)(t - g_mt), n, want_count);
  }
  return MT_REPEAT;
}

__attribute__((noinline)) static int mt_recurse(struct mt_thread* t, int left) {
  int calls = left > 0 ? mt_recurse(t, left - 1) : mt_collect(t);
  sink++;
  return calls;
}

static void* mt_main(void* arg) {
  struct mt_thread* t = arg;
  void* pcs[MT_MAX];
  int n = unw_backtrace(pcs, MT_MAX);
  t->outermost = n > 0 ? pcs[n - 1] : NULL;
  t_mt = t;
  pthread_barrier_wait(&g_mt_barrier);
  int calls = 0;
  for (int i = 0; calls < MT_CALLS || (t->signal_walks < MT_SIGNALS && i < 100000); ++i)
    calls += mt_recurse(t, i % MT_DEPTHS);
  t_mt = NULL;
  return NULL;
}

static void run_threads(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = mt_on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, NULL);
  pthread_barrier_init(&g_mt_barrier, NULL, MT_THREADS + 1);
  for (int i = 0; i < MT_THREADS; ++i) pthread_create(&g_mt[i].thread, NULL, mt_main, &g_mt[i]);
  pthread_barrier_wait(&g_mt_barrier);
  /* Interrupts the threads while they run (until each has received a few signals). */
  for (int round = 0; round < 100000; ++round) {
    int done = 1;
    for (int i = 0; i < MT_THREADS; ++i)
      if (g_mt[i].signal_walks < MT_SIGNALS && pthread_kill(g_mt[i].thread, SIGUSR2) == 0)
        done = 0;
    if (done) break;
    struct timespec pause = {0, 20000};
    nanosleep(&pause, NULL);
  }
  int mismatches = 0, signal_walks = 0, signal_failures = 0;
  for (int i = 0; i < MT_THREADS; ++i) {
    pthread_join(g_mt[i].thread, NULL);
    mismatches += g_mt[i].mismatches;
    signal_walks += g_mt[i].signal_walks;
    signal_failures += g_mt[i].signal_failures;
  }
  signal(SIGUSR2, SIG_DFL);
  for (int i = 0; i < g_mt[0].first_count; ++i) {
    char where[300];
    describe((unw_word_t)g_mt[0].first[i], where, sizeof where);
    printf("BT threads #%d %s\n", i, where);
  }
  fprintf(stderr, "MT: %d signal walks, %d failed\n", signal_walks, signal_failures);
  printf("MT %d threads x %d+ unw_backtrace calls: %s\n", MT_THREADS, MT_CALLS,
         mismatches ? "DIFFERENT from the cursor walks" : "equal to the cursor walks");
  printf("MT signal handlers' unw_backtrace: %s\n",
         signal_failures ? "SOME do not reach the outermost frame"
                         : "all reach the outermost frame");
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  level1();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  signal_level1();
  run_coroutine();
  regs_outer();
  run_threads();
  printf("strerror %s\n", unw_strerror(-UNW_ENOINFO));
  return 0;
}
