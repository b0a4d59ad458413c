/* A library the dlopen test loads after the first walk: its frame must appear in later walks. */
static volatile int sink;

__attribute__((noinline)) void dlopen_lib_call(void (*f)(void)) {
  f();
  sink++;
}
