// Throw-and-catch through DEPTH frames, with or without a destructor in each frame, in THREADS
// threads at once: prints the median over ROUNDS rounds of the nanoseconds per throw (each
// thread's throws timed alone, the threads' medians averaged). The unwinder is whichever
// _Unwind_RaiseException the process binds: libgcc_s as built, or a preloaded one
// (bench/run_eh.sh).
// Usage: throw_bench DEPTH DTOR(0|1) THREADS [THROWS_PER_ROUND] [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

volatile int g_sink;

struct Guard {
  int n;
  ~Guard() { g_sink = n; }
};

__attribute__((noinline)) void plain(int depth) {
  if (depth <= 1) throw depth;
  plain(depth - 1);
  g_sink = depth; // not a tail call
}

__attribute__((noinline)) void with_destructor(int depth) {
  Guard g{depth};
  if (depth <= 1) throw depth;
  with_destructor(depth - 1);
}

double median_ns_per_throw(int depth, bool dtor, int throws, int rounds) {
  std::vector<double> per_round;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < throws; ++i) {
      try {
        if (dtor)
          with_destructor(depth);
        else
          plain(depth);
      } catch (int) {
      }
    }
    const auto end = std::chrono::steady_clock::now();
    per_round.push_back(std::chrono::duration<double, std::nano>(end - start).count() / throws);
  }
  std::sort(per_round.begin(), per_round.end());
  return per_round[per_round.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DEPTH DTOR THREADS [THROWS] [ROUNDS]\n", argv[0]);
    return 2;
  }
  const int depth = std::atoi(argv[1]);
  const bool dtor = std::atoi(argv[2]) != 0;
  const int threads = std::atoi(argv[3]);
  const int throws = argc > 4 ? std::atoi(argv[4]) : 20000 / std::max(1, depth / 4);
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 7;
  (void)median_ns_per_throw(depth, dtor, 200, 1); // warm up: rows found, caches filled
  std::vector<double> result(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { result[t] = median_ns_per_throw(depth, dtor, throws, rounds); });
  for (auto& th : pool)
    th.join();
  double sum = 0;
  for (double r : result)
    sum += r;
  std::printf("%.1f\n", sum / threads);
  return 0;
}
