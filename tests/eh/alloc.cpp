// Allocations per throw once warmed up: malloc & co. are interposed (forwarded to glibc's
// __libc_*) and counted over 1000 throws through 10 frames with a destructor each. libgcc_s
// allocates nothing there; libstdc++'s __cxa_allocate_exception mallocs once per throw. The
// count printed must be the same with libehelf-eh.
#include <cstddef>
#include <cstdio>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);

static unsigned long g_calls;
void* malloc(size_t n) {
  ++g_calls;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  ++g_calls;
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  ++g_calls;
  return __libc_realloc(p, n);
}
void free(void* p) {
  __libc_free(p);
}
void* memalign(size_t a, size_t n) {
  ++g_calls;
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  ++g_calls;
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  ++g_calls;
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;
}
}

struct Guard {
  volatile int n;
  ~Guard() { n = 0; }
};

__attribute__((noinline)) void thrower(int depth) {
  Guard g{depth};
  if (depth == 0) throw 1;
  thrower(depth - 1);
  g.n = 2;
}

static int round_of(int throws) {
  int caught = 0;
  for (int i = 0; i < throws; ++i) {
    try {
      thrower(10);
    } catch (int) {
      ++caught;
    }
  }
  return caught;
}

int main() {
  round_of(100); // the first throws find and remember rows, map caches
  const unsigned long before = g_calls;
  const int caught = round_of(1000);
  const unsigned long calls = g_calls - before;
  std::printf("%d throws caught, %lu allocations\n", caught, calls);
  return 0;
}
