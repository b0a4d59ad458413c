// RangePool: hands out contiguous ranges of a pool of slots (the BPF rows and mappings), first
// fit, joining freed neighbours. The pool may grow (a new shard of rows).
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <optional>

namespace ehelf::bpf {

class RangePool {
public:
  struct Range {
    uint64_t first = 0, count = 0;
  };
  explicit RangePool(uint64_t capacity) { grow(capacity); }

  // Slots from the old capacity to `capacity` become free.
  void grow(uint64_t capacity) {
    if (capacity <= capacity_) return;
    release({capacity_, capacity - capacity_});
    capacity_ = capacity;
  }
  std::optional<Range> allocate(uint64_t count) {
    if (count == 0) return Range{0, 0};
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < count) continue;
      const Range r{it->first, count};
      const uint64_t rest = it->second - count;
      free_.erase(it);
      if (rest) free_.emplace(r.first + count, rest);
      return r;
    }
    return std::nullopt;
  }
  void release(Range r) {
    if (r.count == 0) return;
    auto next = free_.lower_bound(r.first);
    if (next != free_.end() && r.first + r.count == next->first) {
      r.count += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == r.first) {
        prev->second += r.count;
        return;
      }
    }
    free_.emplace(r.first, r.count);
  }
  uint64_t capacity() const { return capacity_; }

private:
  uint64_t capacity_ = 0;
  std::map<uint64_t, uint64_t> free_; // first slot -> count
};

} // namespace ehelf::bpf
