// Profile: what `ehelf record` keeps of a recording. Each sample is unwound as it arrives and
// only its stack of addresses is kept, counted once per distinct (process maps, thread, command
// name, stack); the stack bytes are dropped with the ring buffer's record. A stack seen for the
// first time is resolved against the maps of its time (its frames tied to their modules: O(frames),
// no names), so that exec'd or unloaded code is named as it was; naming happens once, at the end
// (named()), through the SampleUnwinder that unwound the samples, once per distinct address.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "perf/record_stream.hpp"
#include "perf/sample_stack.hpp"
#include "perf/sample_unwinder.hpp"

namespace ehelf::record {

class Profile {
public:
  // One sample of thread `raw.tid` (from `unwinder`'s last feed_raw), whose command name is `comm`
  // at that time.
  void add(const perf::RawStack& raw, std::string_view comm, perf::SampleUnwinder& unwinder);
  // `samples` samples (of `period` in all) of one stack counted elsewhere (the in-kernel walk),
  // whose walk ended for `stop` (its name; empty: the end of the stack).
  void add_counted(const perf::RawStack& raw, std::string_view comm, perf::SampleUnwinder& unwinder,
                   uint64_t samples, uint64_t period, std::string_view stop);
  // Every record of `records` fed to `unwinder`: the samples with a stack copy counted here (each
  // distinct stack resolved when first seen, named at the end), the others (-g chains, the
  // sampled ip only, kernel threads) named as they come and handed to `other`. `progress` is
  // called every 1024 records. (What ehelf perf folds: each distinct stack is named once.)
  void add_recording(perf::RecordStream& records, perf::SampleUnwinder& unwinder,
                     const std::function<void(const perf::SampleStack&)>& other,
                     const std::function<void()>& progress = {});
  // What the second thread of add_recording_summarized keeps of a distinct stack, named.
  using Summarize = std::function<std::string(const perf::SampleStack&)>;
  // As add_recording, on two threads: a distinct stack is named when first seen, on a second
  // thread, which keeps what `summarize` makes of it (ehelf perf -f folded: its folded line) while
  // this thread goes on reading and unwinding; the samples without a stack copy are named on the
  // second thread too, and handed to `other` there. for_each_summary() then gives each distinct
  // stack's summary with its counts: the stacks add_recording then for_each_named give.
  void add_recording_summarized(perf::RecordStream& records, perf::SampleUnwinder& unwinder,
                                const Summarize& summarize,
                                const std::function<void(const perf::SampleStack&)>& other,
                                const std::function<void()>& progress = {});
  void for_each_summary(const std::function<void(const std::string& summary, uint64_t samples,
                                                 uint64_t period)>& use) const;
  // Samples the kernel dropped (PERF_RECORD_LOST: the ring was full).
  void add_lost(uint64_t n) { lost_ += n; }
  void add_corrupt_bytes(uint64_t n) { corrupt_bytes_ += n; }

  uint64_t samples() const { return samples_; }
  uint64_t lost() const { return lost_; }
  uint64_t corrupt_bytes() const { return corrupt_bytes_; }
  size_t distinct_stacks() const { return stacks_.size(); }
  size_t threads() const { return tids_.size(); }
  // Walks that ended otherwise than at the outermost frame, by why (stop_reason_name).
  const std::map<std::string, uint64_t>& stopped_early() const { return stopped_early_; }

  // Every distinct stack, named (the order is unspecified).
  std::vector<perf::CountedStack> named(perf::SampleUnwinder& unwinder) const;
  // The same, one at a time into one CountedStack that `use` sees and must not keep: no copy of
  // every named stack at once (folding a profile whose stacks are nearly all distinct).
  void for_each_named(perf::SampleUnwinder& unwinder,
                      const std::function<void(const perf::CountedStack&)>& use) const;

  // Keep each sample's time and stack (16 bytes a sample) for a per-sample listing.
  void keep_timeline(bool keep) { keep_timeline_ = keep; }
  // Every sample in time order, named (needs keep_timeline(true) before the samples).
  std::vector<perf::SampleStack> timeline(perf::SampleUnwinder& unwinder) const;

private:
  struct Entry {
    perf::ResolvedStack stack; // the first sample of the stack
    std::string comm;
    uint64_t samples = 0, period = 0;
    std::string summary; // add_recording_summarized's, written by its second thread only
  };
  struct SummaryBatch; // what add_recording_summarized's threads hand over
  // The loop of both add_recordings: samples with a stack copy unwound and counted here (`added`
  // sees an entry when its stack is new), the other records handed to `rest`.
  void read_records(perf::RecordStream& records, perf::SampleUnwinder& unwinder,
                    const std::function<void()>& progress, const std::function<void(Entry&)>& added,
                    const std::function<void(const perf::Record&)>& rest);
  // add(), and the entry if the stack is new (else null).
  Entry* add_sample(const perf::RawStack& raw, std::string_view comm,
                    perf::SampleUnwinder& unwinder);
  // The entry of the stack (`added`: it is new), counted by neither.
  Entry& entry_of(const perf::RawStack& raw, std::string_view comm, perf::SampleUnwinder& unwinder,
                  bool& added);
  std::unordered_map<std::string, Entry> stacks_; // by key(): the stack's identity as bytes
  std::unordered_map<uint32_t, bool> tids_;
  std::map<std::string, uint64_t> stopped_early_;
  uint64_t samples_ = 0, lost_ = 0, corrupt_bytes_ = 0;
  std::string key_; // reused between add()s
  bool keep_timeline_ = false;
  std::vector<std::pair<uint64_t, const Entry*>> timeline_; // (time, stack) per sample
};

// The terminal summary: samples, threads, lost, walks that stopped early, the top functions by
// self and by total samples, and where the profile went.
struct SummaryInput {
  const Profile* profile = nullptr;
  const std::vector<perf::CountedStack>* stacks = nullptr;
  double seconds = 0;
  std::string event;
  std::string output; // the file written
  size_t top = 10;
  uint64_t frames_outside_modules = 0; // JIT frames unwound by rbp (SampleUnwinder's count)
};
std::string summary_text(const SummaryInput& in);

} // namespace ehelf::record
