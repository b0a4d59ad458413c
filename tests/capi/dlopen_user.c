/* Walks, then dlopens a library (argv[1]) and walks again through a call into it: the library
 * loaded after the unwinder was initialised must be unwound through (ehelf re-reads the module
 * list at unw_init_local when dl_iterate_phdr's counters changed). Also tries
 * unw_flush_cache(unw_local_addr_space, 0, 0), libunwind's way to say modules changed.
 * unw_backtrace runs first in each walk, so that after the dlopen it is the first to meet the
 * library, and must give the cursor walk's frames.
 * Output: "DLOPEN #N name=SYMBOL" per frame, then "DLOPEN BT same|DIFFERENT". */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static volatile int sink;

__attribute__((noinline)) static void walk(void) {
  void* bt[64];
  int bt_count = unw_backtrace(bt, 64);
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  if (unw_init_local(&cursor, &context) != 0) {
    printf("DLOPEN init failed\n");
    return;
  }
  int i = 0, same = 1;
  do {
    char name[256];
    unw_word_t off, ip = 0;
    if (unw_get_proc_name(&cursor, name, sizeof name, &off) != 0) strcpy(name, "?");
    printf("DLOPEN #%d name=%s\n", i, name);
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    /* Frame 0 is this function at two different calls. */
    if (i > 0 && (i >= bt_count || bt[i] != (void*)ip)) same = 0;
  } while (unw_step(&cursor) > 0 && ++i < 64);
  printf("DLOPEN BT %s\n", same && bt_count == i + 1 ? "same" : "DIFFERENT");
  sink++;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  walk(); /* initialises the unwinder before the library is loaded */
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    printf("DLOPEN %s\n", dlerror());
    return 1;
  }
  void (*call)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(lib, "dlopen_lib_call");
  if (!call) return 1;
  printf("DLOPEN --\n");
  call(walk);
  unw_flush_cache(unw_local_addr_space, 0, 0);
  printf("DLOPEN --\n");
  call(walk);
  return 0;
}
