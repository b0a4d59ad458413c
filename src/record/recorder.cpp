#include "record/recorder.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "bpf/bpf_walk.h"
#include "elf/needed_libraries.hpp"
#include "record/ring_buffer.hpp"
#include "runtime/proc_files.hpp"
#include "runtime/unwind_rule.hpp"
#include "support/monotonic_clock.hpp"

namespace ehelf::record {
namespace {

using Clock = std::chrono::steady_clock;

// At most this long between -a's or -p's start and its first sample in kernel mode, while the
// tables of what runs are built (a machine running chromium and gdb needs seconds; a file built
// later is walked from then on).
constexpr std::chrono::seconds kStartLimit{5};

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 0;
}

// Waits until `fd` is readable (a pidfd: its process exited), a signal arrives or `timeout_ms`
// pass; without a pidfd (before Linux 5.3) only the last two.
void wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, fd >= 0 ? 1 : 0, timeout_ms);
}

// The command, started stopped before its exec: it waits for a byte on the `go` pipe (or the
// pipe's closing, which ends it), so that the events are open on its pid before it runs anything.
// Until it is reaped it belongs to the recorder: whatever ends the recording early (an error, an
// exception) kills and reaps it, so that no process outlives ehelf record holding the caller's
// terminal or pipes.
class Command {
public:
  static Result<Command> start(const std::vector<std::string>& argv) {
    int go[2], failed[2];
    if (::pipe2(go, O_CLOEXEC) != 0) return Error::plain("pipe2 failed");
    if (::pipe2(failed, O_CLOEXEC) != 0) {
      ::close(go[0]);
      ::close(go[1]);
      return Error::plain("pipe2 failed");
    }
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      for (int fd : {go[0], go[1], failed[0], failed[1]})
        ::close(fd);
      return Error::plain(fmt::format("fork: {}", std::strerror(err)));
    }
    if (pid == 0) {
      // Its own copy of the write end would keep the read below from ever seeing the pipe close.
      ::close(go[1]);
      ::close(failed[0]);
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(127); // the recorder gave up
      ::execvp(args[0], args.data());
      const int err = errno;
      [[maybe_unused]] ssize_t n = ::write(failed[1], &err, sizeof err);
      ::_exit(127);
    }
    ::close(go[0]);
    ::close(failed[1]);
    Command c;
    c.pid_ = pid;
    c.go_ = go[1];
    c.failed_ = failed[0];
    return c;
  }

  Command() = default;
  Command(Command&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)), go_(std::exchange(o.go_, -1)),
        failed_(std::exchange(o.failed_, -1)), pidfd_(std::exchange(o.pidfd_, -1)) {}
  Command& operator=(Command&& o) noexcept {
    std::swap(pid_, o.pid_);
    std::swap(go_, o.go_);
    std::swap(failed_, o.failed_);
    std::swap(pidfd_, o.pidfd_);
    return *this;
  }
  ~Command() {
    for (int fd : {go_, failed_, pidfd_})
      if (fd >= 0) ::close(fd);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      reap();
    }
  }

  // Started and not yet reaped.
  bool running() const { return pid_ > 0; }
  int pid() const { return pid_; }
  // Polls readable once the command has exited (-1: no pidfds before Linux 5.3).
  int exit_fd() const { return pidfd_; }

  // Lets it exec; the error when the exec failed (it is then reaped).
  Status run(const std::string& name) {
    // Opened before it can exit, so that the number still names this process.
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    const char go = 1;
    [[maybe_unused]] ssize_t n = ::write(go_, &go, 1);
    ::close(std::exchange(go_, -1));
    int err = 0;
    ssize_t got;
    while ((got = ::read(failed_, &err, sizeof err)) < 0 && errno == EINTR) {
    }
    ::close(std::exchange(failed_, -1));
    if (got != sizeof err) return Ok{}; // closed by the exec
    reap();
    return Error::plain(fmt::format("cannot run {}: {}", name, std::strerror(err)));
  }

  // Its exit status once it has exited (it is then reaped), or -1 while it runs.
  int exited() {
    int status = 0;
    const int r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      return exit_status(status);
    }
    return -1;
  }

  // Ends it as perf record does, with SIGTERM, and waits for it; one more stop request (Ctrl-C
  // again) while it has not ended kills it. Its exit status.
  int terminate(const std::atomic<int>* stop_requests) {
    ::kill(pid_, SIGTERM);
    const int requests = stop_requests ? stop_requests->load() : 0;
    bool killed = false;
    for (;;) {
      if (const int status = exited(); status >= 0) return status;
      if (!killed && stop_requests && stop_requests->load() > requests) {
        ::kill(pid_, SIGKILL);
        killed = true;
      }
      wait_readable(pidfd_, 100);
    }
  }

private:
  void reap() {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

  int pid_ = -1;
  int go_ = -1;     // write end: one byte lets it exec
  int failed_ = -1; // read end: errno of a failed exec, or EOF once exec succeeded
  int pidfd_ = -1;
};

bool alive(int pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// The process a thread belongs to (its thread group), or 0 when there is no such thread.
int process_of_thread(int tid) {
  std::ifstream in(fmt::format("/proc/{}/status", tid));
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("Tgid:")) return std::atoi(line.c_str() + 5);
  return 0;
}

// Where execvp finds `name`: itself when it has a slash, else the first executable of that name
// on PATH (empty if none).
std::string executable_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const size_t colon = dirs.find(':');
    std::string candidate = std::string(dirs.substr(0, colon));
    candidate = (candidate.empty() ? std::string(".") : candidate) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return {};
    dirs.remove_prefix(colon + 1);
  }
}

// Records that describe processes already running when the recording started (perf's
// "synthesized" events): each thread's name and the process's executable mappings, fed to the
// unwinder before the ring's own records.
void describe_running(int pid, perf::SampleUnwinder& unwinder) {
  perf::SampleStack unused;
  for (const ProcMapping& pm : read_proc_maps(pid, true).value_or(std::vector<ProcMapping>{})) {
    // A deleted file (an upgraded library, `./prog & rm prog`) is read through map_files.
    const std::string path = pm.path.empty() ? "//anon" : pm.open_path(pid);
    perf::MmapRecord m;
    m.pid = m.tid = static_cast<uint32_t>(pid);
    m.start = pm.start;
    m.len = pm.end - pm.start;
    m.pgoff = pm.offset;
    m.mmap2 = true;
    m.prot = 4; // PROT_EXEC
    m.filename = path;
    perf::Record r;
    r.type = perf::record_type::kMmap2;
    r.body = m;
    unwinder.feed(r, unused);
  }
  for (int tid : proc_threads(pid).value_or(std::vector<int>{})) {
    const std::string comm = read_line(fmt::format("/proc/{}/task/{}/comm", pid, tid));
    perf::CommRecord c;
    c.pid = static_cast<uint32_t>(pid);
    c.tid = static_cast<uint32_t>(tid);
    c.comm = comm;
    perf::Record r;
    r.type = perf::record_type::kComm;
    r.body = c;
    unwinder.feed(r, unused);
  }
}

// Kernel mode: the in-kernel walk kept in step with the processes (their mappings reloaded when
// the side band says they mapped code or exec'd, dropped when they exit), its counted stacks
// added to the profile, and in copy mode the samples perf also got compared with its walks.
class KernelSide {
public:
  KernelSide(bpf::KernelWalk& walk, perf::SampleUnwinder& unwinder, Profile& profile,
             CopyComparison& copies)
      : walk_(walk), unwinder_(unwinder), profile_(profile), copies_(copies) {}

  // A side-band record, before the unwinder sees it.
  void saw(const perf::Record& r) {
    if (const auto* m = std::get_if<perf::MmapRecord>(&r.body)) {
      if (m->executable()) dirty_.push_back(m->pid);
    } else if (const auto* c = std::get_if<perf::CommRecord>(&r.body)) {
      if (c->exec) {
        dirty_.push_back(c->pid);
        ended_.push_back({c->pid, r.time});
      }
    } else if (r.type == perf::record_type::kFork) {
      if (const auto* t = std::get_if<perf::TaskRecord>(&r.body); t && t->pid != t->ppid)
        forks_.push_back({t->ppid, t->pid}); // a new process, not a thread
    } else if (r.type == perf::record_type::kExit) {
      if (const auto* t = std::get_if<perf::TaskRecord>(&r.body); t && t->pid == t->tid) {
        gone_.push_back(t->pid);
        ended_.push_back({t->pid, r.time});
      }
    }
  }

  // A sample perf got with its stack copy (copy mode), walked here: compared with the kernel's
  // walk of it, not counted (the kernel counted it). The kernel's walk of the sample is the
  // thread's copy from the same registers begun just after perf timed it (pair_of): most come
  // before perf's sample is read, one that waited in the kernel for its tables (parked) after it,
  // when it was walked again; perf's sample then waits here for it. (Copies whose sample perf lost,
  // and samples whose copy the kernel lost, are counted unmatched when too many wait, and at the
  // end.)
  void compare(const perf::Record& r, const perf::RawStack& raw) {
    take_copies();
    const auto& s = std::get<perf::SampleRecord>(r.body);
    uint64_t ip = 0, sp = 0;
    s.reg(perf::perf_reg::kIp, ip);
    s.reg(perf::perf_reg::kSp, sp);
    std::deque<bpf::CopiedWalk>& mine = waiting_[s.tid];
    auto it = pair_of(mine, ip, sp, [&](const bpf::CopiedWalk& c) { return gap(c.time, r.time); });
    if (it == mine.end()) {
      std::deque<UserWalk>& walks = unpaired_[s.tid];
      walks.push_back({ip, sp, r.time, raw.user, raw.stop});
      if (walks.size() > kMaxWaiting) {
        walks.pop_front();
        ++copies_.unmatched;
      }
      return;
    }
    const bpf::CopiedWalk k = std::move(*it);
    mine.erase(it);
    judge(s.tid, k, {raw.user, raw.stop});
  }

  // The kernel's walks of copied samples since the last call: each judged against perf's
  // sample waiting for it, or left to wait for that sample.
  void take_copies() {
    walk_.take_copies([&](const bpf::CopiedWalk& c) {
      std::deque<UserWalk>& walks = unpaired_[c.tid];
      auto it = pair_of(walks, c.ip, c.sp, [&](const UserWalk& u) { return gap(c.time, u.time); });
      if (it == walks.end()) {
        std::deque<bpf::CopiedWalk>& mine = waiting_[c.tid];
        mine.push_back(c);
        if (mine.size() > kMaxWaiting) { // (copies whose perf sample never came: lost)
          mine.pop_front();
          ++copies_.unmatched;
        }
        return;
      }
      const UserWalk u = std::move(*it);
      walks.erase(it);
      judge(c.tid, c, {u.user, u.stop});
    });
  }

  // The recording ends: the next step counts every parked sample (the events are disabled).
  void ending() { ending_ = true; }

  // After the last step: whatever waits for its other half now never gets it.
  void unmatched_at_end() {
    take_copies();
    for (const auto& [tid, copies] : waiting_)
      copies_.unmatched += copies.size();
    for (const auto& [tid, walks] : unpaired_)
      copies_.unmatched += walks.size();
    waiting_.clear();
    unpaired_.clear();
  }

  // The kernel's walk `k` of a sample against this walk of its stack copy (`raw`: its frames and
  // why it ended).
  struct UserFrames {
    const std::vector<uint64_t>& user;
    StopReason stop;
  };
  void judge(uint32_t tid, const bpf::CopiedWalk& k, const UserFrames& raw) {
    ++copies_.compared;
    if (k.user == raw.user) {
      ++copies_.identical;
    } else if (k.stop == EHELF_STOP_NO_PROCESS || k.stop == EHELF_STOP_NO_TABLE_YET ||
               (k.stop == EHELF_STOP_NO_MAPPING && k.user.size() <= raw.user.size() &&
                std::equal(k.user.begin(), k.user.end(), raw.user.begin())) ||
               (k.outside > 0 && raw.stop != StopReason::NoModule)) {
      // (A walk that reached a pc in no mapping it knew, which this walk found in a module:
      // code mapped since the kernel's copy of the process's mappings was made. From there it
      // stops, or follows rbp, as in JIT code, where this walk had the module's table.)
      ++copies_.not_loaded;
    } else if (k.stop == EHELF_STOP_NOT_EXPRESSIBLE) {
      ++copies_.not_expressible;
    } else if (((raw.stop == StopReason::BadRead || raw.stop == StopReason::MissingRegister) &&
                k.user.size() > raw.user.size() &&
                std::equal(raw.user.begin(), raw.user.end(), k.user.begin())) ||
               (k.parked && k.stop == EHELF_STOP_BAD_READ && k.user.size() < raw.user.size() &&
                std::equal(k.user.begin(), k.user.end(), raw.user.begin()))) {
      // (Either walk past its stack copy: perf's, of --stack-size bytes, or the 16 KiB the
      // kernel kept of a parked sample.)
      ++copies_.outside_copy;
    } else if (k.parents_space) {
      ++copies_.parents_space;
    } else {
      ++copies_.other;
      if (copies_.examples.size() < 8) {
        size_t same = 0;
        while (same < k.user.size() && same < raw.user.size() && k.user[same] == raw.user[same])
          ++same;
        auto at = [&](const std::vector<uint64_t>& pcs) {
          return same < pcs.size() ? fmt::format("{:#x}", pcs[same]) : std::string("none");
        };
        copies_.examples.push_back(
            fmt::format("tid {}: kernel {} frames ({}), user {} frames ({}), first difference at "
                        "frame {}: kernel {}, user {}",
                        tid, k.user.size(), bpf::walk_stop_name(k.stop), raw.user.size(),
                        stop_reason_name(raw.stop), same, at(k.user), at(raw.user)));
      }
    }
  }

  // After a batch of records: the processes that changed reloaded, the requests answered, and
  // (every 100 ms, or `everything` now) the counted stacks added to the profile against the maps
  // of now. Batches come at every side-band record; a drain empties the count maps, and each
  // stack counted again after it costs the program an insertion.
  void step(bool everything) {
    // Programs that ended (an exec, an exit) while samples of them may wait in the kernel: kept
    // for those, before their processes are read again or forgotten, with the mappings the
    // unwinder has of them once the side band up to their end has been fed to it (in time order:
    // the records of the last 2 ms wait in their rings).
    std::erase_if(ended_, [&](const Ended& e) {
      if (!everything && e.until > side_band_read_to_) return false;
      if (!walk_.samples_waiting(e.pid)) return true;
      const perf::SampleUnwinder::Program program = unwinder_.program_at(e.pid, e.until - 1);
      std::vector<bpf::SideBandMapping> mappings;
      for (const perf::FileMapping& m : program.mappings)
        mappings.push_back({m.start, m.end, m.offset, m.path, m.build_id});
      walk_.program_ended(e.pid, mappings, program.began, e.until);
      return true;
    });
    for (const auto& [parent, child] : forks_)
      walk_.inherit_process(parent, child);
    forks_.clear();
    std::sort(dirty_.begin(), dirty_.end());
    dirty_.erase(std::unique(dirty_.begin(), dirty_.end()), dirty_.end());
    for (uint32_t pid : dirty_)
      if (std::find(gone_.begin(), gone_.end(), pid) == gone_.end()) walk_.refresh_process(pid);
    dirty_.clear();
    walk_.serve_requests();
    // Samples parked for tables loaded since are walked now (at most every 20 ms: each run walks
    // every parked sample again; before a process that exited is forgotten), all of them at the
    // end.
    const auto replay_time = std::chrono::steady_clock::now();
    if (everything || !gone_.empty() ||
        replay_time - last_replay_ >= std::chrono::milliseconds(20)) {
      last_replay_ = replay_time;
      walk_.replay_parked(ending_);
      take_copies();
    }
    for (uint32_t pid : gone_)
      walk_.forget_process(pid);
    gone_.clear();
    const auto drain_time = std::chrono::steady_clock::now();
    if (!everything && drain_time - last_drain_ < std::chrono::milliseconds(100)) return;
    last_drain_ = drain_time;
    const uint64_t now = monotonic_ns();
    // A stack is named with the maps of the program it ran in (the process may have exec'd
    // another since: SampleUnwinder::adopt_raw), known once the side band up to that program's
    // first sample is read: one sampled after the side band read in order (Drain's `settled`)
    // waits for the next drain. The last drain names them all.
    std::vector<bpf::KernelStack> waiting = std::move(later_);
    later_.clear();
    auto add = [&](const bpf::KernelStack& k) {
      if (!everything && k.space_since >= side_band_read_to_) {
        later_.push_back(k);
        return;
      }
      raw_.pid = k.pid;
      raw_.tid = k.tid;
      raw_.time = now;
      raw_.period = k.period;
      raw_.kernel = k.kernel;
      raw_.user = k.user;
      raw_.user_walked = !k.user.empty();
      raw_.stop = k.stop == EHELF_STOP_END ? StopReason::EndOfStack : StopReason::None;
      unwinder_.adopt_raw(raw_, k.samples, k.space_since);
      profile_.add_counted(raw_, k.comm, unwinder_, k.samples, k.period,
                           k.stop == EHELF_STOP_END || k.user.empty()
                               ? std::string_view{}
                               : bpf::walk_stop_name(k.stop));
    };
    for (const bpf::KernelStack& k : waiting)
      add(k);
    walk_.drain(add);
  }

  // The side band up to `time` (the records' clock) is read next, in order.
  void side_band_read_to(uint64_t time) { side_band_read_to_ = time; }

private:
  bpf::KernelWalk& walk_;
  perf::SampleUnwinder& unwinder_;
  Profile& profile_;
  CopyComparison& copies_;
  // Programs that ended: the process, and the record time of the exec or exit that ended it.
  struct Ended {
    uint32_t pid = 0;
    uint64_t until = 0;
  };
  std::vector<Ended> ended_;
  std::vector<uint32_t> dirty_, gone_;
  std::vector<std::pair<uint32_t, uint32_t>> forks_; // (parent, child)
  // A copied sample's walk here, waiting for the kernel's (parked: walked again later).
  struct UserWalk {
    uint64_t ip = 0, sp = 0;
    uint64_t time = 0; // perf's time of the sample
    std::vector<uint64_t> user;
    StopReason stop = StopReason::None;
  };
  // The program begins with a sample after perf timed it, a few microseconds later (measured:
  // 0.5-46 us, median 0.9; python3 at 4 kHz, every sample copied): a copy begun at most this long
  // after perf's time is that sample's. A thread's next sample comes 250 us later at 4 kHz and
  // more: a walk parked in the kernel, which comes late, is not paired with a later sample's
  // perf half from the same registers (measured before this bound, with a nearest-either-way
  // pairing: 1 of 537 exec storm samples under ASan paired crosswise).
  static constexpr uint64_t kPairWindow = 200000; // ns
  // How long after perf timed a sample the kernel's walk began (negative: before).
  static int64_t gap(uint64_t kernel_time, uint64_t perf_time) {
    return int64_t(kernel_time - perf_time);
  }
  // The entry of `halves` from registers (ip, sp) that is the other half of a sample: the one
  // whose `gap_of` (gap()) is smallest in [0, kPairWindow]; end() if none.
  template <typename Halves, typename GapOf>
  static typename Halves::iterator pair_of(Halves& halves, uint64_t ip, uint64_t sp, GapOf gap_of) {
    auto best = halves.end();
    int64_t best_gap = int64_t(kPairWindow) + 1;
    for (auto it = halves.begin(); it != halves.end(); ++it) {
      if (it->ip != ip || it->sp != sp) continue;
      const int64_t g = gap_of(*it);
      if (g < 0 || g >= best_gap) continue;
      best_gap = g;
      best = it;
    }
    return best;
  }
  // Halves waiting for their other half, per thread: more than this and the oldest is dropped
  // (its other half was lost). The kernel parks at most EHELF_PARK_ENTRIES samples.
  static constexpr size_t kMaxWaiting = 4096;
  std::unordered_map<uint32_t, std::deque<bpf::CopiedWalk>> waiting_; // by thread, in order
  std::unordered_map<uint32_t, std::deque<UserWalk>> unpaired_;       // by thread, in order
  std::chrono::steady_clock::time_point last_replay_{};
  bool ending_ = false;
  perf::RawStack raw_;
  std::chrono::steady_clock::time_point last_drain_{};
  uint64_t side_band_read_to_ = 0;
  std::vector<bpf::KernelStack> later_; // counted stacks named at the next drain
};

// Everything the rings hold now, in time order, fed to the unwinder and the profile (or, in
// kernel mode, the side band to the kernel side too, and the samples to its comparison).
class Drain {
public:
  Drain(EventSet& events, perf::SampleUnwinder& unwinder, Profile& profile, KernelSide* kernel_side)
      : events_(events), unwinder_(unwinder), profile_(profile), kernel_side_(kernel_side) {}

  uint64_t records() const { return records_; }
  uint64_t bytes() const { return bytes_; }

  // `everything`: every record read, and the kernel's counts too, whenever they were last read.
  void operator()(bool everything = false) {
    batch_.clear();
    std::vector<RingBuffer>& rings = events_.rings();
    seen_.resize(rings.size());
    taken_.resize(rings.size());
    // A record is written a little after its time was taken: one timed just before the rings
    // were read may not be in its ring yet while a later one is read from another (an exec's
    // records on one CPU, a sample of the new program on the other: walked with the old maps).
    // Records timed up to `settled` are all read; later ones wait in their rings for the next
    // drain (perf's ordering by rounds does the same).
    const uint64_t settled = everything ? UINT64_MAX : monotonic_ns() - kOnTheirWay;
    if (kernel_side_) kernel_side_->side_band_read_to(settled);
    for (size_t i = 0; i < rings.size(); ++i) {
      RingBuffer& ring = rings[i];
      const uint64_t corrupt = ring.corrupt_bytes();
      const auto records = ring.pending();
      // (A ring found corrupt is given back whole: what follows the damage cannot be read again.)
      const bool may_wait = ring.corrupt_bytes() == corrupt;
      size_t taken = 0;
      bool waiting = false;
      for (size_t j = 0; j < records.size(); ++j) {
        const std::span<const uint8_t> bytes = records[j];
        const bool fresh = j >= seen_[i]; // (not read in a drain before: waited there)
        perf::Record r;
        std::memcpy(&r.type, bytes.data(), 4);
        std::memcpy(&r.misc, bytes.data() + 4, 2);
        std::string why;
        if (!perf::decode_kernel_record(bytes.subspan(8), 8, events_.attr(), r, why)) {
          if (fresh) profile_.add_corrupt_bytes(bytes.size());
        } else {
          // The kernel side reloads processes as the side band says, whatever waits.
          if (fresh && kernel_side_) kernel_side_->saw(r);
          waiting = waiting || (may_wait && r.time > settled);
          if (!waiting) batch_.push_back(std::move(r));
        }
        if (!waiting) {
          ++taken;
          bytes_ += bytes.size();
        }
      }
      taken_[i] = taken;
      seen_[i] = records.size() - taken;
      profile_.add_corrupt_bytes(ring.corrupt_bytes() - corrupt);
    }
    // Each ring is in time order; the rings together are put in it (a mapping made on one CPU
    // comes before the samples that run in it on another).
    std::stable_sort(batch_.begin(), batch_.end(),
                     [](const perf::Record& a, const perf::Record& b) { return a.time < b.time; });
    for (const perf::Record& r : batch_) {
      ++records_;
      if (const auto* lost = std::get_if<perf::LostRecord>(&r.body)) {
        profile_.add_lost(lost->lost);
        continue;
      }
      if (unwinder_.feed_raw(r, raw_)) {
        if (kernel_side_)
          kernel_side_->compare(r, raw_);
        else
          profile_.add(raw_, unwinder_.comm_of(raw_.pid, raw_.tid), unwinder_);
      }
    }
    batch_.clear();
    for (size_t i = 0; i < rings.size(); ++i)
      rings[i].release(taken_[i]);
    if (kernel_side_) kernel_side_->step(everything);
  }

private:
  EventSet& events_;
  perf::SampleUnwinder& unwinder_;
  Profile& profile_;
  KernelSide* kernel_side_;
  // How long after its time a record may still be on its way into its ring (microseconds,
  // with interrupts off; a margin for a virtual CPU the host stalls).
  static constexpr uint64_t kOnTheirWay = 2000000; // ns
  std::vector<perf::Record> batch_;
  std::vector<size_t> taken_; // per ring: how many of its records this drain took
  std::vector<size_t> seen_;  // per ring: how many of its first records a drain before read
  perf::RawStack raw_;
  uint64_t records_ = 0, bytes_ = 0;
};

// The events a recording samples with, and in kernel mode the in-kernel walk attached to them.
// (The events close first, as the walk's program is attached to them.)
struct Sampling {
  std::unique_ptr<bpf::KernelWalk> walk;
  std::optional<EventSet> events;
};

// The files whose tables kernel mode builds while its program loads: what the command runs (a
// script's interpreter, through `env`, and scripts run by scripts) and the libraries it needs,
// as the loader will find them.
std::vector<std::string> command_files(const std::vector<std::string>& command) {
  std::vector<std::string> files;
  if (command.empty()) return files;
  std::string program = executable_path(command[0]), runs;
  for (int level = 0; level < 4 && !program.empty(); ++level) {
    files.push_back(program);
    runs = program;
    program = script_interpreter(program, executable_path);
  }
  if (!runs.empty())
    for (std::string& library : needed_libraries(runs))
      files.push_back(std::move(library));
  return files;
}

// The events opened in the mode asked for. Kernel mode, where it is asked for or possible under
// Auto (which says why not otherwise): the program loads (the verifier, libbpf's parse of the
// kernel's BTF: ~60 ms) on a thread of its own while the events open as kernel mode wants them
// (the first perf event of a machine can take ~12 ms: the kernel patches its static keys), and
// the command's tables are built on another (6-17 ms here), installed once it has loaded; the
// events open again for user mode if it fails to load, or under Auto if an event refuses it.
// (On an error the command, still waiting for its exec, is killed and reaped by ~Command.)
Result<Sampling> open_sampling(const RecordOptions& o, const Target& target) {
  Sampling sampling;
  std::unique_ptr<bpf::KernelWalk>& walk = sampling.walk;
  std::future<Result<std::unique_ptr<bpf::KernelWalk>>> loading;
  std::string why;
  if (o.unwind != UnwindMode::User) {
    why = bpf::kernel_walk_unavailable();
    if (why.empty()) {
      bpf::KernelWalkOptions ko;
      ko.max_depth = uint32_t(std::min<size_t>(o.max_depth, 512));
      ko.kernel_stacks = o.sampling.kernel;
      ko.copy_every = o.kernel_copy_every;
      ko.find_mappings_only = o.kernel_find_mappings;
      ko.park = o.kernel_park;
      ko.debug_dirs = o.debug_dirs;
      loading = std::async(std::launch::async, [ko] { return bpf::KernelWalk::load(ko); });
    }
  }
  std::future<std::shared_ptr<bpf::KernelWalk::PreparedFiles>> preparing;
  if (loading.valid())
    preparing =
        std::async(std::launch::async, [files = command_files(o.command), dirs = o.debug_dirs] {
          return bpf::KernelWalk::prepare_files(files, dirs);
        });
  auto open_events = [&](bool kernel_mode) -> Result<EventSet> {
    SamplingOptions options = o.sampling;
    if (kernel_mode && o.kernel_copy_every == 0) options.stack_size = 0; // no stack bytes at all
    options.wake_on_each_record = kernel_mode;
    return EventSet::open(options, target);
  };
  Result<EventSet> opened = [&]() -> Result<EventSet> {
    const bool for_kernel = loading.valid();
    Result<EventSet> events = open_events(for_kernel);
    if (loading.valid()) {
      auto loaded = loading.get(); // (waited for on every path: the thread owns libbpf's log)
      if (loaded)
        walk = std::move(*loaded);
      else
        why = loaded.error().to_string();
    }
    if (o.unwind != UnwindMode::User && !walk) {
      if (o.unwind == UnwindMode::Kernel) return Error::plain("--unwind kernel: " + why);
      if (o.on_note) o.on_note("unwinding user stacks in user space: " + why);
      if (for_kernel) return open_events(false); // (those for kernel mode closed on return)
    }
    if (events && walk)
      for (int fd : events->fds())
        if (Status attached = walk->attach(fd); !attached) return std::move(attached).error();
    return events;
  }();
  if (opened) {
    sampling.events.emplace(std::move(*opened));
  } else if (walk && o.unwind == UnwindMode::Auto) {
    // The program loaded but an event refused it: user space walks instead.
    if (o.on_note) o.on_note("unwinding user stacks in user space: " + opened.error().message);
    walk.reset();
    auto again = open_events(false);
    if (!again) return std::move(again).error();
    sampling.events.emplace(std::move(*again));
  } else {
    return std::move(opened).error();
  }
  if (walk) {
    // Tables loaded before anything runs, so that the first samples walk: the command's
    // executable and the libraries it needs (prepared above; waited for here); the files this
    // process maps (libc, ld.so, libstdc++: what most programs map too) on the builder's thread,
    // as it runs; the processes already running that are recorded. (ehelf's own executable is
    // no other program's.)
    std::vector<std::string> likely;
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    const std::string own = n > 0 ? std::string(self, size_t(n)) : std::string();
    for (const ProcMapping& m :
         read_proc_maps(::getpid(), true).value_or(std::vector<ProcMapping>{}))
      if (!m.path.empty() && m.path[0] == '/' && m.path != own) likely.push_back(m.path);
    walk->preload_prepared(*preparing.get());
    walk->preload_files(likely, /*now=*/false);
    if (target.kind == Target::Processes) {
      for (int pid : target.pids)
        walk->refresh_process(uint32_t(pid));
    } else if (target.kind == Target::Threads) {
      for (int tid : target.pids)
        walk->refresh_process(uint32_t(process_of_thread(tid)));
    }
  }
  return sampling;
}

// -a, -p and -t: the events enabled, and what already runs described to the unwinder (the
// processes given, those of the threads given, or every process for -a). In kernel mode the
// program drops samples until the tables of what runs now are built (the events are enabled
// first all the same, so that no side-band record of a mapping made meanwhile is missed). When
// sampling began.
Clock::time_point start_running(const Target& target, EventSet& events,
                                perf::SampleUnwinder& unwinder, bpf::KernelWalk* walk,
                                Recording& rec, const std::atomic<int>* stop_requests) {
  const Clock::time_point start = Clock::now();
  if (walk) walk->hold_samples(true);
  events.enable();
  std::vector<int> running = target.kind == Target::System
                                 ? proc_numeric_entries("/proc").value_or(std::vector<int>{})
                                 : target.pids;
  if (target.kind == Target::Threads) {
    std::transform(running.begin(), running.end(), running.begin(), process_of_thread);
    std::sort(running.begin(), running.end());
    running.erase(std::unique(running.begin(), running.end()), running.end());
  }
  for (int pid : running) {
    describe_running(pid, unwinder);
    // -a: the processes on a CPU now are read, and their files' tables built, before their
    // first samples ask (those of a busy machine's programs were the walks lost to tables not
    // loaded yet); the others, idle, load if they run. (-p's and -t's were read at the load.)
    if (walk && target.kind == Target::System && proc_runs(pid)) {
      walk->refresh_process(uint32_t(pid));
      ++rec.kernel_start_processes;
    }
  }
  if (!walk) return start;
  if (target.kind != Target::System) rec.kernel_start_processes = running.size();
  // Sampling begins once those tables are built (libLLVM's take ~0.1 s, a busy machine's
  // programs together ~0.5 s), or after kStartLimit: its first samples then walk as its others
  // do, where they stopped at "table not loaded yet". The duration counts from here.
  const auto stopped = [&] { return stop_requests && stop_requests->load() > 0; };
  while (walk->tables_building() && !stopped() && Clock::now() - start < kStartLimit) {
    pollfd ready{walk->built_fd(), POLLIN, 0};
    ::poll(&ready, 1, 50);
    walk->serve_requests();
  }
  walk->hold_samples(false);
  rec.kernel_start_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return Clock::now();
}

} // namespace

Result<Recording> record(const RecordOptions& o, const std::atomic<int>* stop_requests) {
  const auto stopped = [&] { return stop_requests && stop_requests->load() > 0; };
  Target target;
  Command command;
  if (o.system_wide) {
    target.kind = Target::System;
  } else if (!o.pids.empty()) {
    target.kind = Target::Processes;
    for (int pid : o.pids)
      if (pid <= 0 || !alive(pid)) return Error::plain(fmt::format("no process {}", pid));
    target.pids = o.pids;
  } else if (!o.tids.empty()) {
    target.kind = Target::Threads;
    for (int tid : o.tids)
      if (tid <= 0 || process_of_thread(tid) <= 0)
        return Error::plain(fmt::format("no thread {}", tid));
    target.pids = o.tids;
  } else if (!o.command.empty()) {
    auto started = Command::start(o.command);
    if (!started) return std::move(started).error();
    command = std::move(*started);
    target.pids = {command.pid()};
  } else {
    return Error::plain("nothing to record: give a command, -p PID, -t TID or -a");
  }
  auto sampling = open_sampling(o, target);
  if (!sampling) return std::move(sampling).error();
  EventSet& events = *sampling->events;
  bpf::KernelWalk* walk = sampling->walk.get();
  if (!events.note().empty() && o.on_note) o.on_note(events.note());
  Recording rec;
  rec.kernel = events.kernel();
  rec.frequency = events.frequency();
  rec.profile.keep_timeline(o.keep_timeline);
  perf::SampleUnwinderOptions uo;
  uo.backend = o.backend;
  uo.max_depth = o.max_depth;
  uo.debug_dirs = o.debug_dirs;
  uo.demangle = o.demangle;
  uo.kernel = events.kernel();
  rec.unwinder = std::make_unique<perf::SampleUnwinder>(perf::RecordingInfo{}, uo);
  // /proc/kallsyms (a hundred thousand lines) is read while the command runs, not after it:
  // the profile can be named the moment the command ends.
  std::future<perf::KernelSymbols> kernel_names;
  if (events.kernel())
    kernel_names =
        perf::KernelSymbols::load_in_background([] { return perf::KernelSymbols::load(""); });
  Clock::time_point start = Clock::now();
  if (command.running()) {
    if (Status s = command.run(o.command[0]); !s) return std::move(s).error();
  } else {
    start = start_running(target, events, *rec.unwinder, walk, rec, stop_requests);
  }
  std::unique_ptr<KernelSide> kernel_side;
  if (walk) {
    rec.in_kernel = true;
    kernel_side = std::make_unique<KernelSide>(*walk, *rec.unwinder, rec.profile, rec.copies);
  }
  Drain drain(events, *rec.unwinder, rec.profile, kernel_side.get());
  // The command's exit wakes the loop at once (its pidfd polls readable), so that the profile is
  // ready the moment it ends; without pidfds (before Linux 5.3) within 100 ms.
  Clock::time_point interval_start = start;
  unsigned intervals = 0;
  for (;;) {
    events.wait(100,
                {command.exit_fd(), walk ? walk->requests_fd() : -1, walk ? walk->built_fd() : -1});
    drain();
    if (stopped()) break;
    if (o.interval > 0 && o.on_interval &&
        std::chrono::duration<double>(Clock::now() - interval_start).count() >= o.interval) {
      drain(/*everything=*/true);
      rec.seconds = std::chrono::duration<double>(Clock::now() - interval_start).count();
      if (kernel_names.valid()) rec.unwinder->set_kernel_symbols(kernel_names.get());
      if (walk) rec.kernel_walk = walk->stats();
      if (Status written = o.on_interval(rec, ++intervals); !written)
        return std::move(written).error();
      rec.profile = Profile{};
      rec.profile.keep_timeline(o.keep_timeline);
      interval_start = Clock::now();
    }
    if (o.duration > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= o.duration)
      break;
    if (command.running()) {
      if (const int status = command.exited(); status >= 0) {
        rec.exit_status = status;
        break;
      }
    } else if (target.kind == Target::Processes &&
               std::none_of(target.pids.begin(), target.pids.end(), alive)) {
      break;
    } else if (target.kind == Target::Threads &&
               std::none_of(target.pids.begin(), target.pids.end(), process_of_thread)) {
      break;
    }
  }
  rec.seconds = std::chrono::duration<double>(Clock::now() - interval_start).count();
  events.disable();
  if (kernel_side) kernel_side->ending();
  drain(/*everything=*/true);
  if (kernel_side) kernel_side->unmatched_at_end();
  // Stopped early: the command ends as under perf record.
  if (command.running()) rec.exit_status = command.terminate(stop_requests);
  rec.ring_records = drain.records();
  rec.ring_bytes = drain.bytes();
  if (walk) rec.kernel_walk = walk->stats();
  if (kernel_names.valid()) rec.unwinder->set_kernel_symbols(kernel_names.get());
  return rec;
}

std::string user_walk_summary(const Recording& rec) {
  const uint64_t samples = rec.profile.samples();
  return fmt::format("user stacks walked in user space: bytes out of the kernel: {} from the perf "
                     "rings ({:.1f} per sample)\n",
                     rec.ring_bytes, samples ? double(rec.ring_bytes) / double(samples) : 0.0);
}

std::string kernel_walk_summary(const Recording& rec) {
  const bpf::KernelWalkStats& k = rec.kernel_walk;
  std::string out = fmt::format(
      "user stacks walked in the kernel: {} samples, {:.1f} frames each; {} files' tables "
      "({} rows, {:.1f} MiB; largest {} rows: {}), {} processes\n",
      k.samples, k.samples ? double(k.frames) / double(k.samples) : 0.0, k.files, k.rows,
      double(k.row_bytes) / double(1 << 20), k.largest_file_rows, k.largest_file, k.processes);
  if (rec.kernel_start_processes)
    out += fmt::format("  sampling began once the tables of {} running process{} were loaded, "
                       "after {:.2f} s\n",
                       rec.kernel_start_processes, rec.kernel_start_processes == 1 ? "" : "es",
                       rec.kernel_start_seconds);
  std::string stops;
  for (unsigned i = 0; i < bpf::kWalkStopCount; ++i)
    if (k.stops[i] && i != EHELF_STOP_END)
      stops +=
          fmt::format("{}{} {}", stops.empty() ? "" : ", ", bpf::walk_stop_name(i), k.stops[i]);
  if (!stops.empty()) out += "  kernel walks that stopped early: " + stops + "\n";
  std::string rows;
  for (unsigned i = 0; i < k.not_expressible.size(); ++i)
    if (k.not_expressible[i])
      rows += fmt::format("{}{} {}", rows.empty() ? "" : ", ",
                          not_expressible_name(NotExpressible(i)), k.not_expressible[i]);
  if (!rows.empty()) out += "  rows not expressible in the kernel: " + rows + "\n";
  if (k.found_files || k.found_unknown)
    out += fmt::format("  mappings found in the kernel (pcs outside those read from /proc): {} "
                       "of files with a table ({} the interpreter's, by its aux vector entry), {} "
                       "of files without one yet\n",
                       k.found_files, k.found_interpreter, k.found_unknown);
  if (k.parked || k.park_full)
    out += fmt::format("  samples that waited in the kernel for their tables: {} (walked again "
                       "once loaded; {} not kept: the queue was full)\n",
                       k.parked, k.park_full);
  if (k.programs_kept)
    out += fmt::format("  programs that ended (exec, exit) while samples of them waited: {} "
                       "(those walked with the mappings they had)\n",
                       k.programs_kept);
  if (k.parked > k.replayed && !k.replay_error.empty())
    out += fmt::format("  {} of them never walked again: the replay's BPF program: {}\n",
                       k.parked - k.replayed, k.replay_error);
  const uint64_t lost = k.requests_lost + k.counts_full + k.stacks_full + k.copies_lost;
  if (lost)
    out += fmt::format("  dropped: {} requests, {} counts, {} stacks, {} copies (maps full)\n",
                       k.requests_lost, k.counts_full, k.stacks_full, k.copies_lost);
  out += fmt::format("  bytes out of the kernel: {} from the perf rings, {} from the maps "
                     "({:.1f} per sample)\n",
                     rec.ring_bytes, k.bytes_read,
                     k.samples ? double(rec.ring_bytes + k.bytes_read) / double(k.samples) : 0.0);
  if (k.runs)
    out += fmt::format("  BPF program: {} runs, {:.0f} ns each ({:.1f} ns per frame)\n", k.runs,
                       double(k.run_time_ns) / double(k.runs),
                       k.frames ? double(k.run_time_ns) / double(k.frames) : 0.0);
  if (k.replay_runs && k.replay_time_ns)
    out += fmt::format("  parked samples' replay: {} runs, {:.2f} ms in all\n", k.replay_runs,
                       double(k.replay_time_ns) / 1e6);
  if (k.frames) {
    // (A frame taken from the CPU's last walk looks no row up.)
    const uint64_t looked_up = k.frames - std::min(k.memo_frames, k.frames);
    out += fmt::format(
        "  frames taken from the CPU's last walk (their words read again): {:.1f}% ({} not: "
        "the words had changed); rows of the others found in the program's row cache: {:.1f}%; "
        "stack reads: {:.1f} per sample\n",
        100.0 * double(k.frames - looked_up) / double(k.frames), k.memo_changed,
        looked_up
            ? 100.0 * double(looked_up - std::min(k.row_misses, looked_up)) / double(looked_up)
            : 100.0,
        k.samples ? double(k.stack_reads) / double(k.samples) : 0.0);
  }
  const CopyComparison& c = rec.copies;
  if (c.compared || c.unmatched) {
    out += fmt::format("  copy mode: {} samples walked both ways, {} identical ({:.2f}%); "
                       "differing: {} not loaded yet, {} not expressible, {} outside the stack "
                       "copy, {} in a parent's address space, {} other; {} unmatched\n",
                       c.compared, c.identical,
                       c.compared ? 100.0 * double(c.identical) / double(c.compared) : 0.0,
                       c.not_loaded, c.not_expressible, c.outside_copy, c.parents_space, c.other,
                       c.unmatched);
    for (const std::string& e : c.examples)
      out += "    " + e + "\n";
  }
  return out;
}

} // namespace ehelf::record
