/* Walks from a program whose unwind tables have no usable .eh_frame_hdr search table (linked
 * with -Wl,--no-eh-frame-hdr, or its header's table removed by test_capi.sh), built unchanged
 * against the real libunwind and against ehelf's (test_capi.sh compares them):
 *
 *   CHAIN cursor frames=N chain=level3,level2,level1,main    unw_step's walk
 *   CHAIN backtrace frames=N chain=level3,level2,level1,main unw_backtrace's
 *   GLIBC frames=N same=yes|no   glibc's backtrace() (libgcc's unwinder, or libunwind's
 *                                _Unwind_Backtrace when linked with it): whether its callers'
 *                                pcs (all but the first) are unw_backtrace's
 *
 * A chain lists this program's frames, named with unw_get_proc_name (dladdr for unw_backtrace's
 * addresses: it has no cursor; the program is linked with -rdynamic, its functions global), up
 * to main.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>

#define MAX_FRAMES 64

static volatile int sink;

void level1(void);
void level2(void);
void level3(void);

/* Appends `name` to `chain` if `ip` is in this program; true once main is reached. */
static int add_frame(char* chain, size_t size, size_t* used, unw_word_t ip, const char* name) {
  Dl_info info, self;
  if (!dladdr((void*)ip, &info) || !dladdr((void*)&add_frame, &self) ||
      info.dli_fbase != self.dli_fbase || *used >= size)
    return 0;
  *used += (size_t)snprintf(chain + *used, size - *used, "%s%s", *used ? "," : "", name);
  return strcmp(name, "main") == 0;
}

__attribute__((noinline)) void level3(void) {
  void* glibc[MAX_FRAMES];
  void* ours[MAX_FRAMES];
  const int glibc_frames = backtrace(glibc, MAX_FRAMES);
  const int our_frames = unw_backtrace(ours, MAX_FRAMES);

  char chain[512] = "";
  size_t used = 0;
  int frames = 0, step = 0, reached = 0;
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  unw_init_local(&cursor, &context);
  do {
    unw_word_t ip = 0, off = 0;
    char name[128];
    ++frames;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    if (!reached && unw_get_proc_name(&cursor, name, sizeof name, &off) == 0)
      reached = add_frame(chain, sizeof chain, &used, ip, name);
  } while (frames < MAX_FRAMES && (step = unw_step(&cursor)) > 0);
  printf("CHAIN cursor frames=%d chain=%s%s\n", frames, chain,
         step < 0 ? " (unw_step failed)" : "");

  chain[0] = '\0';
  used = 0;
  reached = 0;
  for (int i = 0; i < our_frames && !reached; ++i) {
    Dl_info info;
    if (dladdr(ours[i], &info) && info.dli_sname)
      reached = add_frame(chain, sizeof chain, &used, (unw_word_t)ours[i], info.dli_sname);
  }
  printf("CHAIN backtrace frames=%d chain=%s\n", our_frames, chain);

  int same = glibc_frames == our_frames;
  for (int i = 1; same && i < our_frames; ++i)
    same = glibc[i] == ours[i];
  printf("GLIBC frames=%d same=%s\n", glibc_frames, same ? "yes" : "no");
  sink++;
}

__attribute__((noinline)) void level2(void) {
  level3();
  sink++;
}

__attribute__((noinline)) void level1(void) {
  level2();
  sink++;
}

int main(void) {
  level1();
  return 0;
}
