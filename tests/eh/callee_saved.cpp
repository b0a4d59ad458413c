// A handler that needs rbx, rbp and r12-r15 as they were in its frame, several frames up: the
// catching function keeps six values live across the throwing call (at -O2 in the six
// callee-saved registers; the test checks its prologue saves them all), every frame between
// keeps six values of its own in them, a cleanup frame's destructor and the thrower clobber
// them. The unwinder must restore each register from the right frame's save slot.
#include <cstdio>

__attribute__((noinline)) long opaque(long x) {
  asm volatile("" : "+r"(x));
  return x;
}

__attribute__((noinline)) void thrower(long v) {
  asm volatile("mov $-1, %%rbx\n\tmov $-2, %%r12\n\tmov $-3, %%r13\n\tmov $-4, %%r14\n\t"
               "mov $-5, %%r15" ::
                   : "rbx", "r12", "r13", "r14", "r15");
  throw v;
}

__attribute__((noinline)) long middle(int depth, long seed) {
  long a = opaque(seed + 11), b = opaque(seed * 13), c = opaque(seed ^ 17);
  long d = opaque(seed - 19), e = opaque(seed * 23 + 1), f = opaque(seed + 29);
  if (depth == 0)
    thrower(seed);
  else
    opaque(middle(depth - 1, seed) + a);
  return opaque(a + b + c + d + e + f);
}

struct Clobbers {
  long v;
  ~Clobbers() {
    long a = opaque(v + 1), b = opaque(v * 2), c = opaque(v ^ 3), d = opaque(v - 4),
         e = opaque(v * 5), f = opaque(v + 6);
    opaque(a + b + c + d + e + f);
    asm volatile("" ::: "rbx", "r12", "r13", "r14", "r15");
  }
};

__attribute__((noinline)) long with_cleanup(long seed) {
  Clobbers c{seed * 31};
  long a = opaque(seed + 1), b = opaque(seed + 2), x = opaque(seed + 3), d = opaque(seed + 4),
       e = opaque(seed + 5), f = opaque(seed + 6);
  opaque(middle(3, seed));
  return opaque(a + b + x + d + e + f);
}

// The six values the handler checks, computed again.
__attribute__((noinline)) long expected(long seed, int i) {
  const long v[6] = {seed * 7 + 1,  seed * 11 + 2, seed * 13 + 3,
                     seed * 17 + 4, seed * 19 + 5, seed * 23 + 6};
  return v[i];
}

__attribute__((noinline)) int catcher(long seed) {
  long a = opaque(seed * 7 + 1), b = opaque(seed * 11 + 2), c = opaque(seed * 13 + 3);
  long d = opaque(seed * 17 + 4), e = opaque(seed * 19 + 5), f = opaque(seed * 23 + 6);
  try {
    opaque(with_cleanup(seed));
  } catch (long thrown) {
    const long got[6] = {a, b, c, d, e, f};
    int bad = 0;
    for (int i = 0; i < 6; ++i)
      if (got[i] != expected(seed, i)) {
        std::printf("value %d: %ld, expected %ld\n", i, got[i], expected(seed, i));
        bad = 1;
      }
    if (thrown != seed) bad = 1;
    return bad;
  }
  return 2;
}

int main() {
  int bad = 0;
  for (long seed = 1; seed < 200; ++seed)
    bad |= catcher(seed);
  std::puts(bad ? "callee-saved registers: wrong" : "callee-saved registers: restored");
  return bad;
}
