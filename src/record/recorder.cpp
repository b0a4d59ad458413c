#include "record/recorder.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>

#include "record/ring_buffer.hpp"
#include "runtime/proc_files.hpp"

namespace ehelf::record {
namespace {

using Clock = std::chrono::steady_clock;

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
    r.type = perf::record::kMmap2;
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
    r.type = perf::record::kComm;
    r.body = c;
    unwinder.feed(r, unused);
  }
}

// Everything the rings hold now, in time order, fed to the unwinder and the profile.
class Drain {
public:
  Drain(EventSet& events, perf::SampleUnwinder& unwinder, Profile& profile)
      : events_(events), unwinder_(unwinder), profile_(profile) {}

  uint64_t records() const { return records_; }

  void operator()() {
    batch_.clear();
    for (RingBuffer& ring : events_.rings()) {
      const uint64_t corrupt = ring.corrupt_bytes();
      for (std::span<const uint8_t> bytes : ring.pending()) {
        perf::Record r;
        std::memcpy(&r.type, bytes.data(), 4);
        std::memcpy(&r.misc, bytes.data() + 4, 2);
        std::string why;
        if (!perf::decode_kernel_record(bytes.subspan(8), 8, events_.attr(), r, why)) {
          profile_.add_corrupt_bytes(bytes.size());
          continue;
        }
        batch_.push_back(std::move(r));
      }
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
      if (unwinder_.feed_raw(r, raw_))
        profile_.add(raw_, unwinder_.comm_of(raw_.pid, raw_.tid), unwinder_);
    }
    batch_.clear();
    for (RingBuffer& ring : events_.rings())
      ring.release();
  }

private:
  EventSet& events_;
  perf::SampleUnwinder& unwinder_;
  Profile& profile_;
  std::vector<perf::Record> batch_;
  perf::RawStack raw_;
  uint64_t records_ = 0;
};

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
  // On an error the command, still waiting for its exec, is killed and reaped by ~Command.
  auto opened = EventSet::open(o.sampling, target);
  if (!opened) return std::move(opened).error();
  EventSet events = std::move(*opened);
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
    kernel_names = std::async(std::launch::async, [] { return perf::KernelSymbols::load(""); });
  const Clock::time_point start = Clock::now();
  if (command.running()) {
    if (Status s = command.run(o.command[0]); !s) return std::move(s).error();
  } else {
    events.enable();
    // What already runs: the processes given, those of the threads given, or every process for
    // -a.
    std::vector<int> running = target.kind == Target::System
                                   ? proc_numeric_entries("/proc").value_or(std::vector<int>{})
                                   : target.pids;
    if (target.kind == Target::Threads) {
      std::transform(running.begin(), running.end(), running.begin(), process_of_thread);
      std::sort(running.begin(), running.end());
      running.erase(std::unique(running.begin(), running.end()), running.end());
    }
    for (int pid : running)
      describe_running(pid, *rec.unwinder);
  }
  Drain drain(events, *rec.unwinder, rec.profile);
  // The command's exit wakes the loop at once (its pidfd polls readable), so that the profile is
  // ready the moment it ends; without pidfds (before Linux 5.3) within 100 ms.
  for (;;) {
    events.wait(100, command.exit_fd());
    drain();
    if (stopped()) break;
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
  rec.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  events.disable();
  drain();
  // Stopped early: the command ends as under perf record.
  if (command.running()) rec.exit_status = command.terminate(stop_requests);
  rec.ring_records = drain.records();
  if (kernel_names.valid()) rec.unwinder->set_kernel_symbols(kernel_names.get());
  return rec;
}

} // namespace ehelf::record
