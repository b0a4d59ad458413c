#include "record/profile.hpp"

#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "perf/folded.hpp"
#include "perf/stack_pipeline.hpp"
#include "support/batch_queue.hpp"

namespace ehelf::record {
namespace {

void append(std::string& key, uint64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

} // namespace

void Profile::add(const perf::RawStack& raw, std::string_view comm,
                  perf::SampleUnwinder& unwinder) {
  add_sample(raw, comm, unwinder);
}

Profile::Entry* Profile::add_sample(const perf::RawStack& raw, std::string_view comm,
                                    perf::SampleUnwinder& unwinder) {
  ++samples_;
  tids_[raw.tid] = true;
  if (raw.user_walked && raw.stop != StopReason::EndOfStack)
    ++stopped_early_[std::string(stop_reason_name(raw.stop))];
  bool added = false;
  Entry& e = entry_of(raw, comm, unwinder, added);
  ++e.samples;
  e.period += raw.period;
  if (keep_timeline_) timeline_.emplace_back(raw.time, &e);
  return added ? &e : nullptr;
}

void Profile::add_counted(const perf::RawStack& raw, std::string_view comm,
                          perf::SampleUnwinder& unwinder, uint64_t samples, uint64_t period,
                          std::string_view stop) {
  samples_ += samples;
  tids_[raw.tid] = true;
  if (!stop.empty()) stopped_early_[std::string(stop)] += samples;
  bool added = false;
  Entry& e = entry_of(raw, comm, unwinder, added);
  e.samples += samples;
  e.period += period;
  // Counted in the kernel, the samples have no times of their own: the drain's (raw.time).
  if (keep_timeline_)
    for (uint64_t i = 0; i < samples; ++i)
      timeline_.emplace_back(raw.time, &e);
}

Profile::Entry& Profile::entry_of(const perf::RawStack& raw, std::string_view comm,
                                  perf::SampleUnwinder& unwinder, bool& added) {
  // The identity of a stack: the maps it is named in, the thread, its name, every address.
  key_.clear();
  append(key_, raw.maps_id);
  append(key_, (uint64_t(raw.pid) << 32) | raw.tid);
  append(key_, raw.kernel.size());
  for (uint64_t pc : raw.kernel)
    append(key_, pc);
  for (uint64_t pc : raw.user)
    append(key_, pc);
  key_.append(comm);
  auto [it, fresh] = stacks_.try_emplace(key_);
  Entry& e = it->second;
  added = fresh;
  if (fresh) {
    e.stack = unwinder.resolve(raw);
    e.comm = std::string(comm);
  }
  return e;
}

void Profile::read_records(perf::RecordStream& records, perf::SampleUnwinder& unwinder,
                           const std::function<void()>& progress,
                           const std::function<void(Entry&)>& added,
                           const std::function<void(const perf::Record&)>& rest) {
  perf::RawStack raw;
  uint64_t count = 0;
  while (const perf::Record* r = records.next()) {
    if ((++count & 1023) == 0 && progress) progress();
    if (const auto* s = std::get_if<perf::SampleRecord>(&r->body);
        s && s->regs_abi != 0 && !s->stack.empty()) {
      unwinder.feed_raw(*r, raw);
      if (Entry* e = add_sample(raw, unwinder.comm_of(raw.pid, raw.tid), unwinder)) added(*e);
      continue;
    }
    rest(*r);
  }
}

void Profile::add_recording(perf::RecordStream& records, perf::SampleUnwinder& unwinder,
                            const std::function<void(const perf::SampleStack&)>& other,
                            const std::function<void()>& progress) {
  perf::SampleStack stack;
  read_records(
      records, unwinder, progress, [](Entry&) {},
      [&](const perf::Record& r) {
        if (unwinder.feed(r, stack)) other(stack);
      });
}

// In the recording's order: a new distinct stack to name and summarize, or a sample without a
// stack copy to name and hand over. Slots are reused batch after batch (BatchQueue).
struct Profile::SummaryBatch {
  struct Item {
    Entry* entry = nullptr; // the new stack, or null for `other`
    perf::PreparedStack other;
  };
  std::vector<Item> items;
  size_t count = 0;
};

void Profile::add_recording_summarized(perf::RecordStream& records, perf::SampleUnwinder& unwinder,
                                       const Summarize& summarize,
                                       const std::function<void(const perf::SampleStack&)>& other,
                                       const std::function<void()>& progress) {
  // The two threads share the unwinder as ehelf perf's pipeline does (for_each_stack): this one
  // only feeds, unwinds and resolves (the processes' state), the other only names (the naming
  // state). An entry's stack and command name are written before it is handed over, and only
  // its summary after; the map's nodes stay where they are as it grows.
  BatchQueue<SummaryBatch> queue(perf::kMaxQueuedBatches);
  ConsumerThread<SummaryBatch> namer(queue, [&] {
    perf::SampleStack stack;
    while (std::unique_ptr<SummaryBatch> b = queue.pop()) {
      for (size_t i = 0; i < b->count; ++i) {
        SummaryBatch::Item& item = b->items[i];
        if (item.entry) {
          unwinder.name_stack(item.entry->stack, item.entry->comm, stack);
          item.entry->summary = summarize(stack);
        } else {
          unwinder.name_prepared(item.other, stack);
          other(stack);
        }
      }
      queue.give_back(std::move(b));
    }
  });
  std::unique_ptr<SummaryBatch> batch = queue.take_spare();
  auto slot = [&]() -> SummaryBatch::Item& {
    if (batch->count == batch->items.size()) batch->items.emplace_back();
    return batch->items[batch->count];
  };
  auto hand_over = [&] {
    if (++batch->count < perf::kStackBatch) return;
    queue.push(std::move(batch));
    batch = queue.take_spare();
  };
  read_records(
      records, unwinder, progress,
      [&](Entry& e) {
        slot().entry = &e;
        hand_over();
      },
      [&](const perf::Record& r) {
        SummaryBatch::Item& item = slot();
        if (unwinder.prepare(r, item.other)) {
          item.entry = nullptr;
          hand_over();
        }
      });
  if (batch->count) queue.push(std::move(batch));
  namer.finish();
}

void Profile::for_each_summary(
    const std::function<void(const std::string& summary, uint64_t samples, uint64_t period)>& use)
    const {
  for (const auto& [key, e] : stacks_)
    use(e.summary, e.samples, e.period);
}

std::vector<perf::SampleStack> Profile::timeline(perf::SampleUnwinder& unwinder) const {
  std::map<const Entry*, perf::SampleStack> named;
  std::vector<perf::SampleStack> out;
  out.reserve(timeline_.size());
  auto sorted = timeline_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [time, e] : sorted) {
    auto [it, added] = named.try_emplace(e);
    if (added) unwinder.name_stack(e->stack, e->comm, it->second);
    out.push_back(it->second);
    out.back().time = time;
  }
  return out;
}

std::vector<perf::CountedStack> Profile::named(perf::SampleUnwinder& unwinder) const {
  std::vector<perf::CountedStack> out;
  out.reserve(stacks_.size());
  for_each_named(unwinder, [&](const perf::CountedStack& c) { out.push_back(c); });
  return out;
}

void Profile::for_each_named(perf::SampleUnwinder& unwinder,
                             const std::function<void(const perf::CountedStack&)>& use) const {
  perf::CountedStack c;
  for (const auto& [key, e] : stacks_) {
    unwinder.name_stack(e.stack, e.comm, c.stack);
    c.samples = e.samples;
    c.period = e.period;
    use(c);
  }
}

std::string summary_text(const SummaryInput& in) {
  const Profile& p = *in.profile;
  std::string s;
  auto line = [&](std::string text) {
    s += text;
    s += '\n';
  };
  line(fmt::format("{} samples ({}) in {:.2f} s, {} thread{}, {} distinct stacks", p.samples(),
                   in.event, in.seconds, p.threads(), p.threads() == 1 ? "" : "s",
                   p.distinct_stacks()));
  if (p.lost()) line(fmt::format("{} samples lost (the ring buffer was full)", p.lost()));
  if (p.corrupt_bytes())
    line(fmt::format("{} bytes of a ring buffer were unreadable and skipped", p.corrupt_bytes()));
  if (!p.stopped_early().empty()) {
    std::string why;
    uint64_t n = 0;
    for (const auto& [reason, count] : p.stopped_early()) {
      why += fmt::format("{}{} {}", why.empty() ? "" : ", ", reason, count);
      n += count;
    }
    line(
        fmt::format("{} walk{} stopped before the outermost frame: {}", n, n == 1 ? "" : "s", why));
  }
  if (in.frames_outside_modules)
    line(fmt::format("{} frame{} in code outside any module (JIT) unwound by rbp",
                     in.frames_outside_modules, in.frames_outside_modules == 1 ? "" : "s"));
  // Self: the innermost frame; total: every function on the stack, once per stack.
  std::map<std::string, uint64_t> self, total;
  uint64_t all = 0;
  for (const perf::CountedStack& c : *in.stacks) {
    all += c.samples;
    if (c.stack.frames.empty()) continue;
    self[perf::frame_name(c.stack.frames.front())] += c.samples;
    std::set<std::string> seen;
    for (const perf::StackFrame& f : c.stack.frames)
      if (seen.insert(perf::frame_name(f)).second) total[perf::frame_name(f)] += c.samples;
  }
  auto top = [&](const std::map<std::string, uint64_t>& counts, std::string_view title) {
    std::vector<std::pair<uint64_t, std::string>> sorted;
    for (const auto& [name, n] : counts)
      sorted.emplace_back(n, name);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    if (sorted.size() > in.top) sorted.resize(in.top);
    line(fmt::format("top functions by {}:", title));
    for (const auto& [n, name] : sorted)
      line(fmt::format("  {:6.2f}%  {:>8}  {}", all ? 100.0 * double(n) / double(all) : 0.0, n,
                       name));
  };
  if (all) {
    top(self, "self samples");
    top(total, "total samples (the function or its callees)");
  }
  if (!in.output.empty()) line(fmt::format("profile written to {}", in.output));
  return s;
}

} // namespace ehelf::record
