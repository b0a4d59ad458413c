// EventSet: the perf events a recording samples with, opened with perf_event_open(2), and their
// ring buffers (one per CPU; every event on a CPU writes into that CPU's ring).
//
// What a sample carries: ip, pid/tid, time, cpu, period, the kernel's call chain (kernel frames
// only: exclude_callchain_user, since ehelf unwinds the user stack itself), the four user
// registers the fast walk starts from (ip, sp, bp, bx) and a copy of the user stack from sp up
// (stack_size bytes). Side-band records: mmap2 with build ids, comm (with exec), fork/exit, all
// with a sample_id trailer so that records from different CPUs can be put in time order.
//
// Targets: a command not yet exec'd (per-CPU events on its pid, inherited by every thread and
// child it creates, enabled by its exec), running processes (per-CPU events on each of their
// threads, inherited likewise), some of their threads (likewise), or the whole system (-a). The
// kernel refuses to mmap an inherited per-thread event, hence events per CPU.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "perf/perf_data.hpp"
#include "record/ring_buffer.hpp"
#include "support/result.hpp"

namespace ehelf::record {

// An event by perf's name for it (perf list): its perf_event_attr type and config.
struct EventSpec {
  std::string name = "cpu-clock";
  uint32_t type = 1;   // PERF_TYPE_SOFTWARE
  uint64_t config = 0; // PERF_COUNT_SW_CPU_CLOCK
};
// cpu-clock, task-clock, page-faults, context-switches, cpu-migrations, minor-faults,
// major-faults, cycles, instructions, cache-misses, branch-misses, ...; an error listing them
// for any other name.
Result<EventSpec> parse_event(std::string_view name);

struct SamplingOptions {
  EventSpec event;
  uint64_t frequency = 999;    // samples per second per thread (used when period is 0)
  uint64_t period = 0;         // -c: one sample every `period` events
  uint32_t stack_size = 16384; // 0: no stack copy and no user registers (the kernel walks)
  bool kernel = true;          // kernel frames, where perf_event_paranoid allows them
  // Every record wakes the reader (the in-kernel walk: a process's mappings are reloaded before
  // its samples land in code it does not know yet), even where samples with stack copies fill
  // the ring too (its copy mode); else at a quarter of the ring. Without stack copies, always.
  bool wake_on_each_record = false;
  // Per CPU: 4 MiB hold ~250 samples of 16 KiB, a quarter second at 999 Hz, so that a recorder
  // kept off the CPU by a busy machine loses nothing; halved down to 8 pages when the kernel
  // refuses the memory (perf_event_mlock_kb for unprivileged users).
  size_t ring_pages = 1024;
};
// The largest user stack copy the kernel takes (a record is at most 64 KiB).
constexpr uint32_t kMaxStackSize = 65528;

struct Target {
  enum Kind { Command, Processes, Threads, System } kind = Command;
  // Command: the one child; Processes: the processes (all their threads); Threads: these threads
  // alone (and the threads they start).
  std::vector<int> pids;
};

class EventSet {
public:
  static Result<EventSet> open(const SamplingOptions& options, const Target& target);
  EventSet(EventSet&&) = default;
  ~EventSet();

  // Starts sampling (a command's events start by themselves at its exec).
  void enable();
  void disable();
  // Waits up to `timeout_ms` for a ring to fill past its watermark, or one of `also` (a pidfd:
  // the command exited; the in-kernel walk's requests) to become readable (-1s are ignored).
  void wait(int timeout_ms, std::initializer_list<int> also = {});

  std::vector<RingBuffer>& rings() { return rings_; }
  // Every event opened (to attach the in-kernel walk to).
  const std::vector<int>& fds() const { return fds_; }
  // How the records are laid out (for decode_kernel_record).
  const perf::EventAttr& attr() const { return attr_; }
  // Kernel frames are sampled (false when perf_event_paranoid refused them: user only).
  bool kernel() const { return kernel_; }
  // Said once at the start, or empty: what was given up (kernel frames, ring size, a rate above
  // the kernel's limit).
  const std::string& note() const { return note_; }
  // Samples per second asked of the kernel: SamplingOptions::frequency, or the kernel's limit
  // when it was above it (as perf record, which lowers it with a warning); 0 with a period.
  uint64_t frequency() const { return frequency_; }

private:
  EventSet() = default;
  std::vector<int> fds_;
  std::vector<int> ring_fds_; // the events whose rings are mapped, to poll
  std::vector<RingBuffer> rings_;
  perf::EventAttr attr_;
  bool kernel_ = true;
  uint64_t frequency_ = 0;
  std::string note_;
};

// Where the kernel's limit on samples per second is set.
inline constexpr std::string_view kMaxSampleRatePath =
    "/proc/sys/kernel/perf_event_max_sample_rate";

// "/proc/sys/kernel/perf_event_paranoid is N" with what N allows, for permission errors.
std::string paranoid_hint();

} // namespace ehelf::record
