#include "support/worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ehelf {

void parallel_for(size_t count, unsigned workers,
                  const std::function<void(unsigned worker, size_t item)>& work,
                  const std::function<void(size_t done, size_t count)>& progress) {
  const unsigned n = static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(workers, count)));
  std::atomic<size_t> next{0}, done{0};
  // An exception in a worker would end the process (std::terminate): the first one is kept, no
  // further item is started, and it is rethrown here once every thread has stopped.
  std::mutex failure_lock;
  std::exception_ptr failure;
  auto run = [&](unsigned w) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      try {
        work(w, i);
      } catch (...) {
        std::lock_guard<std::mutex> hold(failure_lock);
        if (!failure) failure = std::current_exception();
        next.store(count, std::memory_order_relaxed);
        done.store(count, std::memory_order_relaxed);
        return;
      }
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
  if (failure) std::rethrow_exception(failure);
}

} // namespace ehelf
