/* C frames built with -fexceptions between a C++ throw and its handler: a cleanup attribute's
 * function runs during the unwinding (C's personality, __gcc_personality_v0). */
#include <stdio.h>

static void cleanup_int(int* p) {
  printf("  C cleanup %d\n", *p);
}

void c_call_back(void (*fn)(int), int depth) {
  int guard __attribute__((cleanup(cleanup_int))) = depth;
  if (depth == 0)
    fn(depth);
  else
    c_call_back(fn, depth - 1);
  printf("  not reached %d\n", guard);
}
