/* unw_resume on local cursors, built unchanged against the real libunwind and against ehelf's
 * (test_capi.sh compares their outputs):
 *
 *   RESUME up ...      a cursor stepped two frames up from level3 resumes level1 where level2
 *                      would have returned, with rax set: level1's callee-saved registers, live
 *                      across the call, must be restored from the frames skipped;
 *   RESUME frame ...   a SIGSEGV handler walks from unw_getcontext through the signal frame to
 *                      the faulting frame, sets rip past the faulting load and rax, and resumes
 *                      it (twice: the second fault is handled only if resuming restored the
 *                      signal mask that blocks SIGSEGV in the handler);
 *   RESUME ucontext .. the same from unw_init_local on the handler's ucontext (SA_NODEFER: a
 *                      resume that is no return from the handler leaves the mask as it is).
 *
 * Each load that faults gives 100 + the number of faults so far. Usage: resume_user MODE, one
 * of up, frame, ucontext.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile long sink;

/* ---- resuming a frame up the stack ---- */

__attribute__((noinline)) static long level3(void) {
  unw_context_t context;
  unw_cursor_t cursor;
  /* level1's values are only in level3's save slots now. */
  __asm__ volatile("xorl %%ebx, %%ebx\n xorl %%ebp, %%ebp\n xorl %%r12d, %%r12d" ::
                       : "rbx", "rbp", "r12");
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) != 0) return -1;
  for (int i = 0; i < 2; ++i) /* to level2's frame, then level1's */
    if (unw_step(&cursor) <= 0) return -2;
  unw_set_reg(&cursor, UNW_X86_64_RAX, 42);
  int r = unw_resume(&cursor);
  printf("RESUME up: unw_resume returned %d (%s)\n", r, unw_strerror(r));
  return -3;
}

__attribute__((noinline)) static long level2(void) {
  long r = level3();
  sink = r;
  return r + 1000; /* not a tail call: level2 has a frame */
}

__attribute__((noinline)) static long level1(long a, long b) {
  long x = a * 3, y = b * 5, z = a ^ b; /* live across the call: callee-saved registers */
  long r = level2();
  sink = r;
  return r * 1000000 + x * 10000 + y * 100 + z;
}

/* ---- skipping a faulting load from a SIGSEGV handler ---- */

extern char fault_insn[], fault_after[];

/* The faulting instruction's bounds are labels; rax is its result. */
__attribute__((noinline, noclone)) static int faulting_load(const int* p) {
  int v;
  __asm__ volatile(".globl fault_insn\n"
                   "fault_insn:\n"
                   "  movl (%%rdi), %%eax\n"
                   ".globl fault_after\n"
                   "fault_after:\n"
                   : "=a"(v)
                   : "D"(p)
                   : "memory");
  return v;
}

static volatile int g_faults;

static void skip(unw_cursor_t* cursor, const char* label) {
  unw_word_t ip = 0;
  unw_get_reg(cursor, UNW_REG_IP, &ip);
  if (ip != (unw_word_t)fault_insn) {
    printf("RESUME %s: the frame's pc is not the faulting load\n", label);
    exit(1);
  }
  ++g_faults;
  unw_set_reg(cursor, UNW_REG_IP, (unw_word_t)fault_after);
  unw_set_reg(cursor, UNW_X86_64_RAX, (unw_word_t)(100 + g_faults));
  int r = unw_resume(cursor);
  printf("RESUME %s: unw_resume returned %d (%s)\n", label, r, unw_strerror(r));
  exit(1);
}

static void on_segv_frame(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)info;
  (void)uc;
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) != 0) exit(1);
  /* The frame after the signal frame is the interrupted one. */
  for (int i = 0; i < 16; ++i) {
    if (unw_step(&cursor) <= 0) break;
    if (unw_is_signal_frame(&cursor) > 0) skip(&cursor, "frame");
  }
  printf("RESUME frame: no signal frame found\n");
  exit(1);
}

static void on_segv_ucontext(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)info;
  unw_cursor_t cursor;
  if (unw_init_local(&cursor, (unw_context_t*)uc) != 0) exit(1);
  skip(&cursor, "ucontext");
}

static void handle_segv(void (*handler)(int, siginfo_t*, void*), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | flags;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc == 2 ? argv[1] : "";
  const int* volatile null = NULL;
  if (strcmp(mode, "up") == 0) {
    const long a = argc + 6, b = argc + 10;
    printf("RESUME up: level1(%ld, %ld) = %ld\n", a, b, level1(a, b));
  } else if (strcmp(mode, "frame") == 0) {
    handle_segv(on_segv_frame, 0);
    for (int i = 0; i < 2; ++i)
      printf("RESUME frame: load %d gave %d\n", i, faulting_load(null));
  } else if (strcmp(mode, "ucontext") == 0) {
    handle_segv(on_segv_ucontext, SA_NODEFER);
    for (int i = 0; i < 2; ++i)
      printf("RESUME ucontext: load %d gave %d\n", i, faulting_load(null));
  } else {
    fprintf(stderr, "usage: resume_user up|frame|ucontext\n");
    return 2;
  }
  printf("RESUME %s: done\n", mode);
  return 0;
}
