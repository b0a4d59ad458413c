#include "record/event_set.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include "perf/perf_data.hpp"
#include "runtime/proc_files.hpp"

namespace ehelf::record {
namespace {

struct NamedEvent {
  std::string_view name;
  uint32_t type;
  uint64_t config;
};
constexpr std::array kEvents{
    NamedEvent{"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    NamedEvent{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    NamedEvent{"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    NamedEvent{"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    NamedEvent{"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    NamedEvent{"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    NamedEvent{"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    NamedEvent{"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    NamedEvent{"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    NamedEvent{"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    NamedEvent{"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    NamedEvent{"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    NamedEvent{"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    NamedEvent{"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    NamedEvent{"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    NamedEvent{"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
};

int perf_event_open(perf_event_attr& attr, int pid, int cpu, int group, unsigned long flags) {
  return static_cast<int>(::syscall(SYS_perf_event_open, &attr, pid, cpu, group, flags));
}

// The CPUs the kernel has (possible ones: an offline CPU's open fails and is skipped).
int cpu_count() {
  const long n = ::sysconf(_SC_NPROCESSORS_CONF);
  return n > 0 ? static_cast<int>(n) : 1;
}

constexpr uint64_t kSampleType = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                 PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN |
                                 PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
// Every general register, as perf records them: the fast walk needs bx, bp, sp and ip, the
// first frame's rule may read any (a return address in rcx, a CFA in r10). 17 words a sample.
constexpr uint64_t kRegsUser = perf::perf_reg::kGeneralMask;

perf_event_attr make_attr(const SamplingOptions& o, const Target& t, bool kernel, bool build_id,
                          size_t ring_bytes) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = o.event.type;
  a.config = o.event.config;
  if (o.period) {
    a.sample_period = o.period;
  } else {
    a.freq = 1;
    a.sample_freq = o.frequency;
  }
  a.sample_type = kSampleType;
  // A software event other than the clocks samples every event when asked for the period with a
  // fixed one (the kernel's perf_swevent_event: each sample's period is then that event's count),
  // so that -c 1000 -e page-faults took every fault. Without it each sample's period is the
  // fixed one, as perf record -c asks.
  if (o.period) a.sample_type &= ~uint64_t(PERF_SAMPLE_PERIOD);
  a.sample_regs_user = kRegsUser;
  a.sample_stack_user = o.stack_size;
  if (o.stack_size == 0) { // the user stack is walked in the kernel: nothing of it is copied
    a.sample_type &= ~uint64_t(PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER);
    a.sample_regs_user = 0;
  }
  a.exclude_callchain_user = 1; // the user stack is ours to unwind
  a.exclude_kernel = kernel ? 0 : 1;
  a.exclude_callchain_kernel = kernel ? 0 : 1;
  a.exclude_hv = 1;
  a.mmap = 1;
  a.mmap2 = 1;
  a.build_id = build_id ? 1 : 0;
  a.comm = 1;
  a.comm_exec = 1;
  a.task = 1;
  a.sample_id_all = 1;
  a.inherit = t.kind == Target::System ? 0 : 1;
  a.disabled = 1;
  a.enable_on_exec = t.kind == Target::Command ? 1 : 0;
  a.watermark = 1;
  a.wakeup_watermark = static_cast<uint32_t>(ring_bytes / 4);
  // Record times on CLOCK_MONOTONIC, which ehelf can read too (the recorder's drain puts the
  // rings' records in order up to a time read before the rings: recorder.cpp, Drain), as the
  // in-kernel walk does (bpf_ktime_get_ns), instead of perf's own clock.
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  if (o.stack_size == 0 || o.wake_on_each_record) {
    // The user stack is walked in the kernel: the ring holds the side band (mmaps, execs,
    // forks, exits: a few records; in copy mode a share of the samples too), and each record
    // wakes the reader, which reloads the process's mappings before its samples land in code it
    // does not know yet. A watermark of one byte: wakeup_events would count samples only, and
    // the BPF program keeps most of them out of the ring.
    a.watermark = 1;
    a.wakeup_watermark = 1;
  }
  return a;
}

perf::EventAttr mirror(const perf_event_attr& a) {
  perf::EventAttr e;
  e.type = a.type;
  e.config = a.config;
  e.sample_period = a.sample_period; // (sample_freq with freq: the same field)
  e.sample_type = a.sample_type;
  e.sample_regs_user = a.sample_regs_user;
  e.sample_stack_user = a.sample_stack_user;
  e.flags = uint64_t(1) << 18 | uint64_t(a.freq) << 10; // sample_id_all, freq: the bits read
  return e;
}

std::string open_error(int err, const SamplingOptions& o, const Target& t, int pid) {
  switch (err) {
  case EACCES:
  case EPERM:
    return fmt::format("perf_event_open: {}; {}", std::strerror(err), paranoid_hint());
  case ENOENT:
  case EOPNOTSUPP:
  case ENODEV:
    return fmt::format("perf_event_open: event '{}' is not supported here ({}); cpu-clock and "
                       "task-clock always are",
                       o.event.name, std::strerror(err));
  case ESRCH:
    return fmt::format("perf_event_open: no process {}", pid);
  case EMFILE:
    return fmt::format("perf_event_open: too many open files for {} threads x {} CPUs (raise "
                       "ulimit -n)",
                       t.pids.size(), cpu_count());
  default:
    return fmt::format("perf_event_open: {}", std::strerror(err));
  }
}

// The kernel's limit on samples per second (it lowers it by itself when sampling interrupts take
// too long), or 0 when it cannot be read.
uint64_t max_sample_rate() {
  std::ifstream in{std::string(kMaxSampleRatePath)};
  uint64_t rate = 0;
  return in >> rate ? rate : 0;
}

// Lowers the asked rate to the kernel's limit, as perf record does, saying so in `note`; false
// when it is not above the limit (or the limit cannot be read).
bool throttle_to_limit(SamplingOptions& o, std::string& note) {
  const uint64_t limit = max_sample_rate();
  if (o.period || limit == 0 || o.frequency <= limit) return false;
  note += fmt::format("{}-F {} is above the kernel's limit of {} samples per second ({}; it lowers "
                      "it when sampling takes too long): sampling at {} per second, as perf "
                      "record does",
                      note.empty() ? "" : "; ", o.frequency, limit, kMaxSampleRatePath, limit);
  o.frequency = limit;
  return true;
}

} // namespace

std::string paranoid_hint() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int level = 0;
  if (!(in >> level)) return "/proc/sys/kernel/perf_event_paranoid cannot be read";
  const char* allows = level <= -1  ? "everything"
                       : level == 0 ? "all but raw tracepoints (needed for -a: -1 or CAP_PERFMON)"
                       : level == 1 ? "kernel and user sampling of a user's own processes"
                       : level == 2 ? "user-space sampling of a user's own processes only"
                                    : "no sampling without CAP_PERFMON (Debian's level 3)";
  return fmt::format("/proc/sys/kernel/perf_event_paranoid is {}: {} allowed{}", level, allows,
                     level > 2 ? " (as root: sysctl kernel.perf_event_paranoid=2)" : "");
}

Result<EventSpec> parse_event(std::string_view name) {
  for (const NamedEvent& e : kEvents)
    if (e.name == name) return EventSpec{std::string(name), e.type, e.config};
  std::string known;
  for (const NamedEvent& e : kEvents)
    known += fmt::format("{}{}", known.empty() ? "" : ", ", e.name);
  return Error::plain(fmt::format("unknown event '{}' (known: {})", name, known));
}

Result<EventSet> EventSet::open(const SamplingOptions& asked, const Target& t) {
  EventSet set;
  SamplingOptions o = asked; // the rate lowered to the kernel's limit
  throttle_to_limit(o, set.note_);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t pages = o.ring_pages;
  bool kernel = o.kernel, build_id = true;
  const int cpus = cpu_count();
  // Who is sampled: (pid, cpu) pairs; every pair on one CPU shares that CPU's ring.
  std::vector<int> pids;
  if (t.kind == Target::System) {
    pids.push_back(-1);
  } else if (t.kind == Target::Command || t.kind == Target::Threads) {
    pids = t.pids;
  } else {
    for (int pid : t.pids) {
      std::vector<int> tids = proc_threads(pid).value_or(std::vector<int>{});
      if (tids.empty()) return Error::plain(fmt::format("no process {}", pid));
      pids.insert(pids.end(), tids.begin(), tids.end());
    }
  }
  for (int cpu = 0; cpu < cpus; ++cpu) {
    int ring_fd = -1;
    for (int pid : pids) {
      int fd = -1, err = 0;
      for (;;) {
        perf_event_attr a = make_attr(o, t, kernel, build_id, pages * page);
        fd = perf_event_open(a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd >= 0) {
          set.attr_ = mirror(a);
          break;
        }
        err = errno;
        // The kernel lowered its limit since (EINVAL for a rate above it).
        if (err == EINVAL && throttle_to_limit(o, set.note_)) continue;
        if (err == EINVAL && build_id) { // before Linux 5.12: mmap2 without build ids
          build_id = false;
          continue;
        }
        if ((err == EACCES || err == EPERM) && kernel) { // user frames only, as perf falls back
          kernel = false;
          set.note_ += fmt::format("{}kernel frames are not sampled: {}",
                                   set.note_.empty() ? "" : "; ", paranoid_hint());
          continue;
        }
        if (err == ENODEV) break;                               // an offline CPU
        if (err == ESRCH && t.kind == Target::Processes) break; // a thread that just exited
        return Error::plain(open_error(err, o, t, pid));
      }
      if (fd < 0) {
        if (err == ENODEV) break; // the next CPU
        continue;
      }
      set.fds_.push_back(fd);
      if (ring_fd < 0) {
        for (;;) {
          auto ring = RingBuffer::map(fd, pages);
          if (ring) {
            set.rings_.push_back(std::move(*ring));
            break;
          }
          if (pages <= 8) return std::move(ring).error();
          pages /= 2; // over perf_event_mlock_kb: a smaller ring
        }
        ring_fd = fd;
        set.ring_fds_.push_back(fd);
      } else if (::ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_fd) != 0) {
        return Error::plain(fmt::format("PERF_EVENT_IOC_SET_OUTPUT: {}", std::strerror(errno)));
      }
    }
  }
  if (set.rings_.empty()) return Error::plain("perf_event_open: no CPU could be sampled");
  if (pages < o.ring_pages)
    set.note_ += fmt::format("{}rings of {} KiB per CPU (the kernel's perf_event_mlock_kb)",
                             set.note_.empty() ? "" : "; ", pages * page / 1024);
  set.kernel_ = kernel;
  set.frequency_ = o.period ? 0 : o.frequency;
  return set;
}

EventSet::~EventSet() {
  rings_.clear();
  for (int fd : fds_)
    ::close(fd);
}

void EventSet::enable() {
  for (int fd : fds_)
    ::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

void EventSet::disable() {
  for (int fd : fds_)
    ::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
}

void EventSet::wait(int timeout_ms, std::initializer_list<int> also) {
  std::vector<pollfd> p;
  for (int fd : ring_fds_)
    p.push_back(pollfd{fd, POLLIN, 0});
  for (int fd : also)
    if (fd >= 0) p.push_back(pollfd{fd, POLLIN, 0});
  ::poll(p.data(), p.size(), timeout_ms);
}

} // namespace ehelf::record
