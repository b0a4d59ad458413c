/* Walks through a plugin that was dlclosed and replaced by another library at its address,
 * from a SIGUSR1 handler (where unw_flush_cache is not allowed), built unchanged against the
 * real libunwind and against ehelf's (test_capi.sh runs both):
 *
 *   ROUND i LIB reused=0|1 backtrace=N cursor=N main=0|1
 *
 * for each of ROUNDS rounds loading LIB_A, then LIB_B, each dlclosed after the walk: whether the
 * library was mapped where the previous one was, the frame counts of unw_backtrace and of a
 * cursor walk from the handler, and whether both reached main. Then:
 *
 *   REACHED n of m walks reached main (k at a reused address)
 *
 * Usage: reload_user LIB_A LIB_B ROUNDS
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*callback)(void);

static volatile int g_backtrace, g_cursor, g_main;

static void on_usr1(int sig) {
  (void)sig;
  void* pcs[64];
  g_backtrace = unw_backtrace(pcs, 64);
  int reached_by_backtrace = 0;
  for (int i = 0; i < g_backtrace; ++i) {
    Dl_info info;
    if (dladdr(pcs[i], &info) && info.dli_sname && strcmp(info.dli_sname, "main") == 0)
      reached_by_backtrace = 1;
  }
  unw_context_t context;
  unw_cursor_t cursor;
  int frames = 0, reached_by_cursor = 0;
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) == 0) do {
      unw_word_t ip = 0;
      Dl_info info;
      ++frames;
      unw_get_reg(&cursor, UNW_REG_IP, &ip);
      if (dladdr((void*)ip, &info) && info.dli_sname && strcmp(info.dli_sname, "main") == 0)
        reached_by_cursor = 1;
    } while (frames < 64 && unw_step(&cursor) > 0);
  g_cursor = frames;
  g_main = reached_by_backtrace && reached_by_cursor;
}

static void from_plugin(void) {
  raise(SIGUSR1);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: reload_user LIB_A LIB_B ROUNDS\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGUSR1, on_usr1);
  const int rounds = atoi(argv[3]);
  void* previous_base = NULL;
  int walks = 0, reached = 0, reused = 0;
  for (int round = 0; round < rounds; ++round)
    for (int which = 1; which <= 2; ++which) {
      void* lib = dlopen(argv[which], RTLD_NOW);
      if (!lib) {
        printf("dlopen: %s\n", dlerror());
        return 1;
      }
      void (*plugin_call)(callback) = (void (*)(callback))dlsym(lib, "plugin_call");
      Dl_info info;
      if (!plugin_call || !dladdr((void*)plugin_call, &info)) return 1;
      const int at_previous = info.dli_fbase == previous_base;
      previous_base = info.dli_fbase;
      g_main = 0;
      plugin_call(from_plugin);
      printf("ROUND %d %s reused=%d backtrace=%d cursor=%d main=%d\n", round,
             which == 1 ? "A" : "B", at_previous, g_backtrace, g_cursor, g_main);
      ++walks;
      reached += g_main;
      reused += at_previous;
      dlclose(lib);
    }
  printf("REACHED %d of %d walks reached main (%d at a reused address)\n", reached, walks, reused);
  return 0;
}
