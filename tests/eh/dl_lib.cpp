// Loaded and unloaded again and again by dl_threads.cpp while other threads throw: a throw
// through this library's frames (its own destructors run) to the caller, and one caught inside.
#include <stdexcept>
#include <string>

namespace {
struct Count {
  int* n;
  ~Count() { ++*n; }
};

__attribute__((noinline)) void down(int depth, int* n) {
  Count c{n};
  if (depth == 0) throw std::runtime_error("from the library");
  down(depth - 1, n);
}
} // namespace

extern "C" int lib_throw_out(int depth, int* destroyed) {
  down(depth, destroyed);
  return 0;
}

extern "C" int lib_catch_inside(int depth) {
  int n = 0;
  try {
    down(depth, &n);
  } catch (const std::runtime_error&) {
    return n;
  }
  return -1;
}
