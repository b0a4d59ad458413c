// parallel_for: items 0..count-1 handed out one at a time to `workers` threads (the calling
// thread is one of them), for commands that process many files. Items are taken in index
// order, so sorting them biggest first keeps the last one a thread picks up small.
#pragma once

#include <cstddef>
#include <functional>

namespace ehelf {

// Calls work(worker, item) for every item; `worker` is in [0, workers) and each worker's calls
// are sequential (per-worker accumulators need no lock). When `progress` is given, the calling
// thread only watches: it calls progress(done, count) every 100 ms and once at the end. An
// exception thrown by `work` stops the handing out of items and is rethrown here once every
// worker has stopped (never std::terminate).
void parallel_for(size_t count, unsigned workers,
                  const std::function<void(unsigned worker, size_t item)>& work,
                  const std::function<void(size_t done, size_t count)>& progress = {});

} // namespace ehelf
