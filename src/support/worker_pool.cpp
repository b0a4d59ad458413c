#include "support/worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ehelf {

void parallel_for(size_t count, unsigned workers,
                  const std::function<void(unsigned worker, size_t item)>& work,
                  const std::function<void(size_t done, size_t count)>& progress) {
  const unsigned n = static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(workers, count)));
  std::atomic<size_t> next{0}, done{0};
  auto run = [&](unsigned w) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      work(w, i);
      done.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = progress ? 0 : 1; w < n; ++w)
    threads.emplace_back(run, w);
  if (progress) {
    while (done.load(std::memory_order_relaxed) < count) {
      progress(done.load(std::memory_order_relaxed), count);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    progress(count, count);
  } else {
    run(0);
  }
  for (std::thread& t : threads)
    t.join();
}

} // namespace ehelf
