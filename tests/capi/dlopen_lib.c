/* A library the dlopen test loads after the first walk: its frame must appear in later walks.
 * Also the plugin first_in_handler loads and unloads in a loop (its constructor allocates, as
 * real plugins do, while signal handlers walk). */
#include <stdlib.h>

static volatile int sink;

__attribute__((constructor)) static void allocate_at_load(void) {
  void* p = malloc(64);
  sink += p != NULL;
  free(p);
}

__attribute__((noinline)) void dlopen_lib_call(void (*f)(void)) {
  f();
  sink++;
}
