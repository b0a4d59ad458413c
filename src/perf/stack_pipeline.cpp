#include "perf/stack_pipeline.hpp"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ehelf::perf {
namespace {

// Prepared stacks in the recording's order; their vectors and strings are reused batch after
// batch (a batch goes back to the producer once named).
struct Batch {
  std::vector<PreparedStack> stacks;
  size_t count = 0;
};

class BatchQueue {
public:
  // Blocks while kMaxQueuedBatches batches wait.
  void push(std::unique_ptr<Batch> b) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return ready_.size() < kMaxQueuedBatches; });
    ready_.push_back(std::move(b));
    changed_.notify_all();
  }
  // The next batch; null once closed and drained.
  std::unique_ptr<Batch> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || closed_; });
    if (ready_.empty()) return nullptr;
    std::unique_ptr<Batch> b = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return b;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }
  void give_back(std::unique_ptr<Batch> b) {
    std::lock_guard<std::mutex> lock(mutex_);
    spare_.push_back(std::move(b));
  }
  std::unique_ptr<Batch> take_spare() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spare_.empty()) return std::make_unique<Batch>();
    std::unique_ptr<Batch> b = std::move(spare_.back());
    spare_.pop_back();
    b->count = 0;
    return b;
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Batch>> ready_;
  std::vector<std::unique_ptr<Batch>> spare_;
  bool closed_ = false;
};

} // namespace

void for_each_stack(RecordStream& records, SampleUnwinder& unwinder,
                    const std::function<void(const SampleStack&)>& use,
                    const StackPipelineOptions& options) {
  uint64_t count = 0;
  auto tick = [&] {
    if ((++count & 1023) == 0 && options.progress) options.progress();
  };
  if (options.threads < 2) {
    SampleStack stack;
    while (const Record* r = records.next()) {
      tick();
      if (unwinder.feed(*r, stack)) use(stack);
    }
    return;
  }
  BatchQueue queue;
  std::thread namer([&] {
    SampleStack stack;
    while (std::unique_ptr<Batch> b = queue.pop()) {
      for (size_t i = 0; i < b->count; ++i) {
        unwinder.name_prepared(b->stacks[i], stack);
        use(stack);
      }
      queue.give_back(std::move(b));
    }
  });
  std::unique_ptr<Batch> batch = queue.take_spare();
  while (const Record* r = records.next()) {
    tick();
    if (batch->count == batch->stacks.size()) batch->stacks.emplace_back();
    if (!unwinder.prepare(*r, batch->stacks[batch->count])) continue;
    if (++batch->count == kStackBatch) {
      queue.push(std::move(batch));
      batch = queue.take_spare();
    }
  }
  if (batch->count) queue.push(std::move(batch));
  queue.close();
  namer.join();
}

} // namespace ehelf::perf
