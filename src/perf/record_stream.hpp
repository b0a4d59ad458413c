// RecordStream: a recording's records in the order perf processes them, decoded as they are
// consumed. perf record writes a FINISHED_ROUND record each time it has read every ring buffer
// once; as perf's ordered events do, records queue until then, and those no later than the
// latest time before the previous round come out sorted by time (stable: records without a time
// take the one of the record before them). A recording in order therefore comes out as a sort
// of all its records would; memory holds about two rounds of records, not the recording.
//
// The queue is bounded whatever the rounds (a recording may have none, or a hostile one millions
// of records between two): past kMaxQueued records or kMaxQueuedBytes of them, the earlier half
// by time is released, as perf's ordered events flush half their queue when over their memory
// limit; and records more than kMaxDelay older than the latest time are released, as no ring
// buffer is read that late. A record that comes after its time was released comes late, as
// after a round.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "perf/perf_data.hpp"

namespace ehelf::perf {

class RecordStream {
public:
  explicit RecordStream(const PerfData& data) : reader_(data) {}

  // The next record, valid until the next call; null after the last one (damage() says whether
  // the data ended early).
  const Record* next();
  // A malformed record that ended the data early (the records before it were given), if any.
  const std::optional<Error>& damage() const { return damage_; }
  // How far the data has been read, in bytes of the file or stream (for progress).
  uint64_t position() const { return reader_.position(); }

  // The reordering window. A Record takes 192 bytes (24 times the smallest record): 2^17 of them,
  // with the vectors they pass through, took 64-80 MB at most in RecordStream.MemoryIsBounded-
  // WithoutRounds. A round is one read of every ring buffer: a window this size reorders
  // 2^16 records (the half kept) across them as perf would.
  static constexpr size_t kMaxQueued = size_t(1) << 17;
  static constexpr uint64_t kMaxQueuedBytes = uint64_t(32) << 20; // of the records' own bytes
  static constexpr uint64_t kMaxDelay = 10'000'000'000;           // ns of perf's clock

private:
  // Queues a record decoded; a FINISHED_ROUND releases what is safe to order.
  void take(Record&& r);
  // Moves the queued records with a time <= limit to ready_, in order.
  void release(uint64_t limit);
  // Past the window's bounds: releases the earlier half of the queue by time.
  void release_half();

  PerfData::Reader reader_;
  std::vector<Record> batch_;                      // decoded, not yet taken
  std::vector<Record> queued_;                     // taken, in file order
  std::vector<uint64_t> queued_time_;              // their times (carried for timeless ones)
  std::vector<std::pair<uint64_t, size_t>> order_; // (time, index in queued_) while releasing
  std::vector<Record> ready_;                      // in time order
  size_t next_ready_ = 0;
  uint64_t last_time_ = 0;   // of the last record taken that has one
  uint64_t max_time_ = 0;    // the latest time taken
  uint64_t round_limit_ = 0; // the latest time before the previous round
  uint64_t queued_bytes_ = 0;
  uint64_t delay_checked_ = 0; // queued_.size() when records older than kMaxDelay were released
  bool ended_ = false;
  std::optional<Error> damage_;
};

} // namespace ehelf::perf
