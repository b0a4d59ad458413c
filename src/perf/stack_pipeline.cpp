#include "perf/stack_pipeline.hpp"

#include <memory>
#include <thread>
#include <vector>

#include "support/batch_queue.hpp"

namespace ehelf::perf {
namespace {

// Prepared stacks in the recording's order; their vectors and strings are reused batch after
// batch (a batch goes back to the producer once named).
struct Batch {
  std::vector<PreparedStack> stacks;
  size_t count = 0;
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
  BatchQueue<Batch> queue(kMaxQueuedBatches);
  ConsumerThread<Batch> namer(queue, [&] {
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
  namer.finish();
}

} // namespace ehelf::perf
