#include "perf/record_stream.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace ehelf::perf {

const Record* RecordStream::next() {
  while (next_ready_ == ready_.size()) {
    ready_.clear();
    next_ready_ = 0;
    if (ended_) return nullptr;
    batch_.clear();
    bool done = false;
    Status s = reader_.next_batch(batch_, done);
    for (Record& r : batch_)
      if (!ended_) take(std::move(r));
    if (!s && !damage_) damage_ = std::move(s).error(); // what came before it stands
    if (damage_ || done) {
      release(~uint64_t(0));
      ended_ = true;
    }
  }
  return &ready_[next_ready_++];
}

void RecordStream::take(Record&& r) {
  if (r.type == record_type::kFinishedRound) {
    // Every ring buffer has been read past the times of the round before this one: what is no
    // later than those cannot be preceded by a record still to come.
    release(round_limit_);
    round_limit_ = max_time_;
    return;
  }
  if (queued_.size() >= kMaxQueued || queued_bytes_ >= kMaxQueuedBytes) release_half();
  if (r.time) last_time_ = r.time;
  max_time_ = std::max(max_time_, last_time_);
  queued_bytes_ += r.size;
  queued_time_.push_back(last_time_);
  queued_.push_back(std::move(r));
  // Now and then (the scan costs the queue's length): what is older than any ring buffer holds.
  if (queued_.size() >= 2 * delay_checked_ + 4096) {
    if (max_time_ > kMaxDelay) release(max_time_ - kMaxDelay);
    delay_checked_ = queued_.size();
  }
}

void RecordStream::release_half() {
  std::vector<uint64_t> times = queued_time_;
  auto middle = times.begin() + static_cast<long>(times.size() / 2);
  std::nth_element(times.begin(), middle, times.end());
  release(*middle);
}

void RecordStream::release(uint64_t limit) {
  order_.clear();
  for (size_t i = 0; i < queued_.size(); ++i)
    if (queued_time_[i] <= limit) order_.emplace_back(queued_time_[i], i);
  // (time, index) pairs: the index keeps file order among equal times, as a stable sort would.
  if (!std::is_sorted(order_.begin(), order_.end())) std::sort(order_.begin(), order_.end());
  for (const auto& [time, i] : order_)
    ready_.push_back(std::move(queued_[i]));
  size_t kept = 0;
  for (size_t i = 0; i < queued_.size(); ++i)
    if (queued_time_[i] > limit) {
      if (kept != i) {
        queued_[kept] = std::move(queued_[i]);
        queued_time_[kept] = queued_time_[i];
      }
      ++kept;
    }
  queued_.resize(kept);
  queued_time_.resize(kept);
  queued_bytes_ = 0;
  for (const Record& r : queued_)
    queued_bytes_ += r.size;
  delay_checked_ = std::min(delay_checked_, queued_.size());
}

} // namespace ehelf::perf
