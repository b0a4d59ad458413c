/* What a libunwind cursor says about signal frames, built unchanged against the real libunwind
 * and against ehelf's, whose outputs test_capi.sh compares. In a SA_SIGINFO handler of a signal
 * raised three calls deep, and of one that interrupts a busy loop at any instruction:
 *
 *   - a walk from unw_getcontext in the handler, through the signal frame: for each frame,
 *     unw_is_signal_frame (after unw_step, then after unw_get_proc_info), whether
 *     unw_get_proc_name names it, and unw_get_save_loc of the registers libunwind tracks (rbx,
 *     rbp, rsp, r12-r15, rip);
 *   - walks from the handler's own ucontext (its third argument), with unw_init_local and with
 *     unw_init_local2(UNW_INIT_SIGNAL_FRAME), the same way: they start at the interrupted frame.
 *
 *   FRAME getcontext #N ip=MODULE+OFF sig=0|1/0|1 name=ok|none rbx=LOC rbp=LOC ... rip=LOC
 *   ASYNC ucontext frames=N chain=spin_outer,main,_start   (from spin_outer on)
 *   ENTRY ucontext ...   (the same, interrupted at a function's first instruction: see g_at_entry)
 *
 * A save location LOC is "-" (UNW_SLT_NONE), "ctx+N" (inside the context the walk started
 * from), "sigctx+N" (inside the signal context the kernel saved), "sp+N"/"sp-N" (relative to
 * the frame's stack pointer), "reg" (UNW_SLT_REG), or
 * "stale" when the address does not hold the register's value (unw_get_reg's). Module offsets
 * and the stack layout are those of this program, so both builds print the same lines.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "describe.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>

static volatile unsigned sink; // wraps: no signed overflow (UBSan)

/* The signal context the kernel saved (the handler's third argument): the interrupted frame's
 * registers are there. Its distance from the stack pointers depends on their alignment, which
 * differs between the two builds' processes, so locations in it are printed from its start. */
static const void* g_signal_context;

static void location(unw_cursor_t* c, int reg, const void* context, char* out, size_t size) {
  unw_save_loc_t loc;
  memset(&loc, 0, sizeof loc);
  if (unw_get_save_loc(c, reg, &loc) != 0) {
    snprintf(out, size, "error");
    return;
  }
  if (loc.type == UNW_SLT_NONE) {
    snprintf(out, size, "-");
    return;
  }
  if (loc.type != UNW_SLT_MEMORY) {
    snprintf(out, size, "reg");
    return;
  }
  unw_word_t value = 0, sp = 0;
  unw_get_reg(c, reg, &value);
  unw_get_reg(c, UNW_REG_SP, &sp);
  if (*(const unw_word_t*)loc.u.addr != value) {
    snprintf(out, size, "stale");
    return;
  }
  long from_context = (long)(loc.u.addr - (unw_word_t)context);
  long from_signal = (long)(loc.u.addr - (unw_word_t)g_signal_context);
  if (from_context >= 0 && from_context < (long)sizeof(unw_context_t))
    snprintf(out, size, "ctx+%ld", from_context);
  else if (from_signal >= 0 && from_signal < (long)sizeof(ucontext_t))
    snprintf(out, size, "sigctx+%ld", from_signal);
  else
    snprintf(out, size, "sp%+ld", (long)(loc.u.addr - sp));
}

static void print_walk(const char* label, unw_cursor_t* c, const void* context) {
  static const struct {
    const char* name;
    int reg;
  } regs[] = {{"rbx", UNW_X86_64_RBX}, {"rbp", UNW_X86_64_RBP}, {"rsp", UNW_X86_64_RSP},
              {"r12", UNW_X86_64_R12}, {"r13", UNW_X86_64_R13}, {"r14", UNW_X86_64_R14},
              {"r15", UNW_X86_64_R15}, {"rip", UNW_X86_64_RIP}};
  for (int i = 0; i < 32; ++i) {
    unw_word_t ip = 0, off = 0;
    char where[300], name[256], line[1024];
    unw_get_reg(c, UNW_REG_IP, &ip);
    describe(ip, where, sizeof where);
    int named = unw_get_proc_name(c, name, sizeof name, &off) == 0;
    /* libunwind answers about the unwind entry it looked up last: the frame unw_step left, or
     * the current one once unw_get_proc_info has looked it up. Both are printed. */
    int stepped = unw_is_signal_frame(c);
    unw_proc_info_t info;
    int looked_up = unw_get_proc_info(c, &info) == 0 ? unw_is_signal_frame(c) : -1;
    int n = snprintf(line, sizeof line, "FRAME %s #%d ip=%s sig=%d/%d name=%s", label, i, where,
                     stepped, looked_up, named ? "ok" : "none");
    for (size_t r = 0; r < sizeof regs / sizeof regs[0]; ++r) {
      char loc[64];
      location(c, regs[r].reg, context, loc, sizeof loc);
      n += snprintf(line + n, sizeof line - n, " %s=%s", regs[r].name, loc);
    }
    printf("%s\n", line);
    int step = unw_step(c);
    if (step < 0) printf("FRAME %s step error: %s\n", label, unw_strerror(step));
    if (step <= 0) break;
  }
}

/* ---- a signal raised three calls deep ---- */

static void on_raised(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)info;
  unw_context_t context;
  unw_cursor_t cursor;
  g_signal_context = uc;
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) == 0) print_walk("getcontext", &cursor, &context);
  if (unw_init_local(&cursor, (unw_context_t*)uc) == 0) print_walk("ucontext", &cursor, uc);
  if (unw_init_local2(&cursor, (unw_context_t*)uc, UNW_INIT_SIGNAL_FRAME) == 0)
    print_walk("ucontext2", &cursor, uc);
}

__attribute__((noinline)) static void raise_level2(void) {
  raise(SIGUSR1);
  sink++;
}

__attribute__((noinline)) static void raise_level1(void) {
  raise_level2();
  sink++;
}

/* ---- a signal interrupting a busy loop, anywhere in it ---- */

static volatile sig_atomic_t g_samples;
/* Set once spin_outer runs: a timer signal may land before it (in main, in setitimer), where
 * the two builds' runs need not take alike samples; those are not kept. */
static volatile sig_atomic_t g_spinning;
static char g_chains[8][512];
static int g_frames[8];
/* Whether the signal landed on a function's first instruction. unw_init_local takes the
 * context's pc for a call site and looks up pc - 1 (libunwind's documented rule; a handler's
 * ucontext needs unw_init_local2 with UNW_INIT_SIGNAL_FRAME), which at an entry is the previous
 * function's last byte: libunwind names spin_inner's entry frame_dummy (no FDE there) and stops
 * after 1 frame, where ehelf walks on. Such samples are printed apart (ENTRY), not compared. */
static int g_at_entry[8];
static void spin_inner(void);
static void spin_outer(void);

static void on_timer(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)info;
  if (g_samples >= 8 || !g_spinning) return;
  const uintptr_t pc = (uintptr_t)((ucontext_t*)uc)->uc_mcontext.gregs[REG_RIP];
  g_at_entry[g_samples] = pc == (uintptr_t)&spin_inner || pc == (uintptr_t)&spin_outer;
  unw_cursor_t cursor;
  if (unw_init_local(&cursor, (unw_context_t*)uc) != 0) return;
  char* chain = g_chains[g_samples];
  int frames = 0;
  size_t used = 0;
  do {
    unw_word_t ip = 0, off = 0;
    char name[256];
    Dl_info info, self;
    ++frames;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    /* Only this program's frames are named: both libraries name them from its .symtab. */
    if (!dladdr((void*)ip, &info) || !dladdr((void*)&on_timer, &self) ||
        info.dli_fbase != self.dli_fbase || unw_get_proc_name(&cursor, name, sizeof name, &off))
      continue;
    used += snprintf(chain + used, sizeof g_chains[0] - used, "%s%s", used ? "," : "", name);
  } while (unw_step(&cursor) > 0 && frames < 64);
  /* From spin_outer on: where in the loop the signal landed does not matter. */
  if (strncmp(chain, "spin_inner,", 11) == 0) {
    memmove(chain, chain + 11, strlen(chain + 11) + 1);
    --frames;
  }
  g_frames[g_samples] = frames;
  g_samples++;
}

__attribute__((noinline)) static void spin_inner(void) {
  for (int i = 0; i < 1000; ++i) sink += i;
}

__attribute__((noinline)) static void spin_outer(void) {
  g_spinning = 1;
  while (g_samples < 8) spin_inner();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_raised;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  raise_level1();

  sa.sa_sigaction = on_timer;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval every = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_PROF, &every, NULL);
  spin_outer();
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  /* The walks from spin_outer on: the same whichever instruction of the loop was interrupted
   * (test_capi.sh compares the distinct lines). */
  for (int i = 0; i < 8; ++i)
    printf("%s ucontext frames=%d chain=%s\n", g_at_entry[i] ? "ENTRY" : "ASYNC", g_frames[i],
           g_chains[i]);
  return 0;
}
