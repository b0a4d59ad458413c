// The named stacks of a recording's samples, in its order, for a consumer (ehelf perf's outputs).
// On one thread, each sample is unwound and named in turn (SampleUnwinder::feed). On two, the
// calling thread reads the records, follows the processes and unwinds each sample
// (SampleUnwinder::prepare) while a second thread names the stacks and hands them to the
// consumer (SampleUnwinder::name_prepared): the unwinder's two halves touch disjoint state, and
// prepared stacks travel between them in batches through a bounded queue (memory: kMaxQueuedBatches
// batches of kStackBatch stacks). The stacks, and so the outputs, are the same either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "perf/record_stream.hpp"
#include "perf/sample_stack.hpp"
#include "perf/sample_unwinder.hpp"

namespace ehelf::perf {

struct StackPipelineOptions {
  unsigned threads = 1; // 1: all on the calling thread; 2 or more: naming on a second one
  // Called on the calling thread every 1024 records (a progress bar).
  std::function<void()> progress;
};

// Feeds every record of `records` to `unwinder`, and each sample's named stack to `use` (on the
// naming thread when there are two; never on two threads at once).
void for_each_stack(RecordStream& records, SampleUnwinder& unwinder,
                    const std::function<void(const SampleStack&)>& use,
                    const StackPipelineOptions& options = {});

// Stacks in flight at most: (kMaxQueuedBatches + 2) * kStackBatch, each up to max_depth frames
// of 48 bytes (~19 MB at 512 frames; deep recursion is what fills them). 128-stack batches keep
// the handing over to a few percent of a batch's naming.
inline constexpr size_t kStackBatch = 128;
inline constexpr size_t kMaxQueuedBatches = 4;

} // namespace ehelf::perf
