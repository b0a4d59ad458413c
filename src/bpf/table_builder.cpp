#include "bpf/table_builder.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>

#include <fmt/format.h>

namespace ehelf::bpf {

BuiltTable build_table(const std::string& path, std::vector<uint8_t> image,
                       const LoadPolicy& policy) {
  BuiltTable out;
  const std::shared_ptr<const ModuleData> data =
      image.empty() ? load_module(path, policy) : load_module_image(std::move(image), path, policy);
  if (!data->elf) return out;
  out.elf = true;
  out.segments = data->elf->segments();
  out.rows = data->has_table() ? encode_bpf_rows(*data->table)
                               : Result<BpfTable>(Error::plain("no unwind table"));
  return out;
}

TableBuilder::TableBuilder() : event_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

TableBuilder::~TableBuilder() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& w : workers_)
    w.join();
  for (Job& j : jobs_)
    ::close(j.fd);
  if (event_ >= 0) ::close(event_);
}

void TableBuilder::submit(Job job) {
  {
    std::lock_guard lock(mutex_);
    if (workers_.empty())
      for (size_t i = 0; i < kThreads; ++i)
        workers_.emplace_back([this] { run(); });
    jobs_.push_back(std::move(job));
  }
  wake_.notify_all();
}

void TableBuilder::want(uint64_t serial) {
  {
    std::lock_guard lock(mutex_);
    for (Job& j : jobs_)
      if (j.serial == serial) j.wanted = true;
  }
  wake_.notify_all();
}

std::optional<size_t> TableBuilder::next_job() const {
  std::optional<size_t> best;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Job& j = jobs_[i];
    if (!j.wanted && speculating_) continue;
    if (!best) {
      best = i;
      continue;
    }
    const Job& b = jobs_[*best];
    if (std::pair(!j.wanted, j.key.size) < std::pair(!b.wanted, b.key.size)) best = i;
  }
  return best;
}

std::vector<TableBuilder::Done> TableBuilder::take() {
  uint64_t count = 0;
  if (event_ >= 0) (void)!::read(event_, &count, sizeof count);
  std::vector<Done> out;
  {
    std::lock_guard lock(mutex_);
    out.swap(done_);
  }
  for (const Done& d : out)
    if (d.failure) std::rethrow_exception(d.failure);
  return out;
}

void TableBuilder::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    std::optional<size_t> next;
    wake_.wait(lock, [&] { return stop_ || (next = next_job()).has_value(); });
    if (stop_) return;
    Job job = std::move(jobs_[*next]);
    jobs_.erase(jobs_.begin() + std::ptrdiff_t(*next));
    const bool speculative = !job.wanted;
    if (speculative) speculating_ = true;
    lock.unlock();
    Done d;
    d.serial = job.serial;
    d.key = job.key;
    try {
      d.table = build_table(fmt::format("/proc/self/fd/{}", job.fd), {}, job.policy);
    } catch (...) {
      d.failure = std::current_exception();
    }
    ::close(job.fd);
    lock.lock();
    if (speculative) {
      speculating_ = false;
      wake_.notify_all(); // the next speculative job may start
    }
    done_.push_back(std::move(d));
    const uint64_t one = 1;
    if (event_ >= 0) (void)!::write(event_, &one, sizeof one);
  }
}

} // namespace ehelf::bpf
