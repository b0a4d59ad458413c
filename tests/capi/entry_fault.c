/* A SIGSEGV on a function's first instruction, unwound from the SA_SIGINFO handler, built
 * unchanged against the real libunwind and against ehelf's (test_capi.sh compares the chains
 * with gdb's backtrace at the fault and with libunwind's).
 *
 * The faulting function's first instruction loads through a null pointer. It follows another
 * function whose last instruction is a call to a noreturn function (so the row at that
 * function's last byte has a frame: CFA=rsp+16), either directly ("packed": the byte before
 * the fault belongs to that function's FDE) or after a padding byte in no FDE ("padded"). A walk
 * that looks up the pc before the fault, as for a return address, takes the other function's
 * row there and skips the caller (packed) or finds no row (padded).
 *
 *   WALK init_local chain=...    unw_init_local on the handler's ucontext
 *   WALK init_local2 chain=...   unw_init_local2(UNW_INIT_SIGNAL_FRAME) on it
 *   WALK getcontext chain=...    unw_getcontext in the handler, from the frame after the signal
 *                                frame on
 * A chain lists this program's frames (named with unw_get_proc_name), up to main.
 *
 * Usage: entry_fault packed|padded
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int crash_packed(int* p);
int crash_padded(int* p);

/* Hand-written, so that the layout does not depend on the compiler's alignment of functions. */
__asm__(".text\n"
        ".p2align 4\n"
        ".type before_packed, @function\n"
        "before_packed:\n"
        ".cfi_startproc\n"
        "  subq $8, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "  call abort@PLT\n"
        ".cfi_endproc\n"
        ".size before_packed, .-before_packed\n"
        ".globl crash_packed\n"
        ".type crash_packed, @function\n"
        "crash_packed:\n"
        ".cfi_startproc\n"
        "  movl (%rdi), %eax\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size crash_packed, .-crash_packed\n"
        ".p2align 4\n"
        ".type before_padded, @function\n"
        "before_padded:\n"
        ".cfi_startproc\n"
        "  subq $8, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "  call abort@PLT\n"
        ".cfi_endproc\n"
        ".size before_padded, .-before_padded\n"
        "  int3\n"
        ".globl crash_padded\n"
        ".type crash_padded, @function\n"
        "crash_padded:\n"
        ".cfi_startproc\n"
        "  movl (%rdi), %eax\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size crash_padded, .-crash_padded\n");

static volatile int sink;

/* The crashing function's callers: real frames (no tail call, no inlining). */
__attribute__((noinline)) static int crash_caller_packed(int* p) {
  int r = crash_packed(p);
  sink = r;
  return r + 1;
}

__attribute__((noinline)) static int crash_caller_padded(int* p) {
  int r = crash_padded(p);
  sink = r;
  return r + 1;
}

/* Prints the walk's frames in this program, from the first one after a signal frame when
 * `after_signal_frame` (the handler's own frames are not the interrupted chain). */
static void print_chain(const char* label, unw_cursor_t* c, int after_signal_frame) {
  char chain[512] = "";
  size_t used = 0;
  int recording = !after_signal_frame, frames = 0;
  Dl_info self;
  dladdr((void*)&print_chain, &self);
  do {
    if (!recording) {
      recording = unw_is_signal_frame(c) > 0;
      if (!recording) continue;
    }
    unw_word_t ip = 0, off = 0;
    char name[128];
    Dl_info info;
    unw_get_reg(c, UNW_REG_IP, &ip);
    if (!dladdr((void*)ip, &info) || info.dli_fbase != self.dli_fbase) continue;
    if (unw_get_proc_name(c, name, sizeof name, &off) != 0) strcpy(name, "?");
    used += (size_t)snprintf(chain + used, sizeof chain - used, "%s%s", used ? "," : "", name);
    if (strcmp(name, "main") == 0 || used >= sizeof chain) break;
  } while (unw_step(c) > 0 && ++frames < 64);
  printf("WALK %s chain=%s\n", label, chain);
}

static void on_segv(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)info;
  unw_cursor_t cursor;
  unw_context_t context;
  if (unw_init_local(&cursor, (unw_context_t*)uc) == 0) print_chain("init_local", &cursor, 0);
  if (unw_init_local2(&cursor, (unw_context_t*)uc, UNW_INIT_SIGNAL_FRAME) == 0)
    print_chain("init_local2", &cursor, 0);
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) == 0) print_chain("getcontext", &cursor, 1);
  fflush(stdout);
  _exit(0);
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "packed") != 0 && strcmp(argv[1], "padded") != 0)) {
    fprintf(stderr, "usage: entry_fault packed|padded\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  int* volatile null = NULL;
  if (strcmp(argv[1], "packed") == 0) return crash_caller_packed(null);
  return crash_caller_padded(null);
}
