/* A plugin for reload_user.c, built twice: plain, and with -DDEEP (more frames, larger ones),
 * so that the two libraries' code at one address has different unwind rows. plugin_call calls
 * back through its own frames. */
typedef void (*callback)(void);

static volatile long sink;

#ifdef DEEP
__attribute__((noinline)) static void deep2(callback cb) {
  volatile char buf[200];
  buf[0] = 1;
  sink = buf[0];
  cb();
  sink++;
}

__attribute__((noinline)) static void deep1(callback cb) {
  volatile long x[40];
  x[3] = 2;
  sink = x[3];
  deep2(cb);
  sink++;
}

void plugin_call(callback cb) {
  volatile long y[17];
  y[1] = 3;
  sink = y[1];
  deep1(cb);
  sink++;
}
#else
__attribute__((noinline)) static void shallow(callback cb) {
  cb();
  sink++;
}

void plugin_call(callback cb) {
  shallow(cb);
  sink++;
}
#endif
