// Threads throwing through a library that another thread keeps loading and unloading, and
// through the main program, all at once. Each thread counts what it caught and the destructors
// that ran; the totals are printed (the same with any correct unwinder).
#include <atomic>
#include <cstdio>
#include <dlfcn.h>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {
std::atomic<bool> g_stop{false};

struct Count {
  long* n;
  ~Count() { ++*n; }
};

__attribute__((noinline)) void local_throw(int depth, long* n) {
  Count c{n};
  if (depth == 0) throw 7;
  local_throw(depth - 1, n);
}
} // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* lib = argv[1];
  void* keep = dlopen(lib, RTLD_NOW); // the throwing threads' copy, loaded throughout
  if (!keep) {
    std::printf("dlopen: %s\n", dlerror());
    return 1;
  }
  auto throw_out = reinterpret_cast<int (*)(int, int*)>(dlsym(keep, "lib_throw_out"));
  auto catch_inside = reinterpret_cast<int (*)(int)>(dlsym(keep, "lib_catch_inside"));
  // Another copy of the library (a second name, so a second load) loaded and unloaded in a loop.
  const char* other = argv[2];
  std::thread churn([other] {
    long loads = 0;
    while (!g_stop.load()) {
      void* h = dlopen(other, RTLD_NOW);
      if (!h) break;
      auto f = reinterpret_cast<int (*)(int)>(dlsym(h, "lib_catch_inside"));
      if (f(3) != 4) std::puts("churn: wrong count");
      dlclose(h);
      ++loads;
    }
    std::printf("churn thread stopped: %s\n", loads > 0 ? "loaded and unloaded" : "no loads");
  });
  std::vector<std::thread> throwers;
  std::vector<long> caught(3), destroyed(3);
  for (int t = 0; t < 3; ++t)
    throwers.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        int n = 0;
        try {
          if (i % 3 == 0) throw_out(i % 5, &n);
          if (i % 3 == 1) local_throw(i % 5, &destroyed[t]);
          if (i % 3 == 2) n = catch_inside(i % 5) - (i % 5 + 1);
        } catch (const std::runtime_error&) {
          ++caught[t];
        } catch (int) {
          ++caught[t];
        }
        destroyed[t] += n;
      }
    });
  for (auto& th : throwers)
    th.join();
  g_stop = true;
  churn.join();
  for (int t = 0; t < 3; ++t)
    std::printf("thread %d: caught %ld, destructors %ld\n", t, caught[t], destroyed[t]);
  dlclose(keep);
  return 0;
}
