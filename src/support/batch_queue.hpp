// BatchQueue: batches of work handed from one producing thread to one consuming thread, in order.
// At most `max_waiting` batches wait (the producer blocks beyond that: memory stays bounded), and
// a consumed batch goes back to the producer to be filled again, so that the vectors and strings
// inside keep their storage from batch to batch. A Batch has a `count` of the items it holds,
// which take_spare() sets to 0.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ehelf {

template <class Batch> class BatchQueue {
public:
  explicit BatchQueue(size_t max_waiting) : max_waiting_(max_waiting) {}

  // Producer: hands a batch over; blocks while max_waiting batches wait.
  void push(std::unique_ptr<Batch> b) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return ready_.size() < max_waiting_; });
    ready_.push_back(std::move(b));
    changed_.notify_all();
  }
  // Producer: no more batches.
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }
  // Producer: an empty batch, one given back if any.
  std::unique_ptr<Batch> take_spare() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spare_.empty()) return std::make_unique<Batch>();
    std::unique_ptr<Batch> b = std::move(spare_.back());
    spare_.pop_back();
    b->count = 0;
    return b;
  }

  // Consumer: the next batch; null once closed and drained.
  std::unique_ptr<Batch> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || closed_; });
    if (ready_.empty()) return nullptr;
    std::unique_ptr<Batch> b = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return b;
  }
  // Consumer: a batch done with, for the producer to fill again.
  void give_back(std::unique_ptr<Batch> b) {
    std::lock_guard<std::mutex> lock(mutex_);
    spare_.push_back(std::move(b));
  }

private:
  const size_t max_waiting_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Batch>> ready_;
  std::vector<std::unique_ptr<Batch>> spare_;
  bool closed_ = false;
};

// The consuming thread of a BatchQueue, running `consume` (which pops until null). An exception
// there must not end the process (std::terminate) nor leave the producer blocked on a full
// queue: it is kept, the rest of the queue is drained unused, and finish() rethrows it on the
// producer's thread, where the command's edge catches it. A producer that throws leaves through
// the destructor, which closes the queue and joins.
template <class Batch> class ConsumerThread {
public:
  ConsumerThread(BatchQueue<Batch>& queue, std::function<void()> consume)
      : queue_(queue), thread_([this, consume = std::move(consume)] {
          try {
            consume();
          } catch (...) {
            failure_ = std::current_exception();
            while (std::unique_ptr<Batch> b = queue_.pop())
              queue_.give_back(std::move(b));
          }
        }) {}
  ~ConsumerThread() {
    if (!thread_.joinable()) return;
    queue_.close();
    thread_.join();
  }
  ConsumerThread(const ConsumerThread&) = delete;
  ConsumerThread& operator=(const ConsumerThread&) = delete;

  // Producer: no more batches; waits for the consumer, and rethrows what ended it.
  void finish() {
    queue_.close();
    thread_.join();
    if (failure_) std::rethrow_exception(failure_);
  }

private:
  BatchQueue<Batch>& queue_;
  std::exception_ptr failure_;
  std::thread thread_; // last: started once the members above exist
};

} // namespace ehelf
