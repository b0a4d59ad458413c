#include "record/profile.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "perf/folded.hpp"

namespace ehelf::record {
namespace {

void append(std::string& key, uint64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

} // namespace

void Profile::add(const perf::RawStack& raw, std::string_view comm,
                  perf::SampleUnwinder& unwinder) {
  ++samples_;
  tids_[raw.tid] = true;
  if (raw.user_walked && raw.stop != StopReason::EndOfStack)
    ++stopped_early_[std::string(stop_reason_name(raw.stop))];
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
  auto [it, added] = stacks_.try_emplace(key_);
  Entry& e = it->second;
  if (added) {
    e.stack = unwinder.resolve(raw);
    e.comm = std::string(comm);
  }
  ++e.samples;
  e.period += raw.period;
  if (keep_timeline_) timeline_.emplace_back(raw.time, &e);
}

void Profile::add_recording(perf::RecordStream& records, perf::SampleUnwinder& unwinder,
                            const std::function<void(const perf::SampleStack&)>& other,
                            const std::function<void()>& progress) {
  perf::RawStack raw;
  perf::SampleStack stack;
  uint64_t count = 0;
  while (const perf::Record* r = records.next()) {
    if ((++count & 1023) == 0 && progress) progress();
    if (const auto* s = std::get_if<perf::SampleRecord>(&r->body);
        s && s->regs_abi != 0 && !s->stack.empty()) {
      unwinder.feed_raw(*r, raw);
      add(raw, unwinder.comm_of(raw.pid, raw.tid), unwinder);
      continue;
    }
    if (unwinder.feed(*r, stack)) other(stack);
  }
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
