/* A C program (no libstdc++) built with -fexceptions: pthread_exit and pthread_cancel run the
 * cleanup attributes' functions and pthread_cleanup_push's handlers of the unwound frames. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void cleanup_int(int* p) {
  printf("  cleanup %d\n", *p);
}

static void handler(void* arg) {
  printf("  pthread_cleanup handler %s\n", (const char*)arg);
}

__attribute__((noinline)) static void deep(int depth, int cancel) {
  int guard __attribute__((cleanup(cleanup_int))) = depth;
  if (depth == 0) {
    if (!cancel) pthread_exit((void*)5);
    for (;;)
      pause(); /* a cancellation point */
  }
  deep(depth - 1, cancel);
  printf("not reached %d\n", guard);
}

static void* run(void* cancel) {
  pthread_cleanup_push(handler, cancel ? "cancel" : "exit");
  deep(3, cancel != NULL);
  pthread_cleanup_pop(0);
  return NULL;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  pthread_t t;
  void* result;
  pthread_create(&t, NULL, run, NULL);
  pthread_join(t, &result);
  printf("exit: %ld\n", (long)result);
  pthread_create(&t, NULL, run, (void*)1);
  usleep(100000);
  pthread_cancel(t);
  pthread_join(t, &result);
  printf("cancel: %s\n", result == PTHREAD_CANCELED ? "canceled" : "?");
  return 0;
}
