#include "record/recorder.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "record/ring_buffer.hpp"
#include "runtime/proc_files.hpp"

namespace ehelf::record {
namespace {

using Clock = std::chrono::steady_clock;

// A command started stopped before its exec: it waits for a byte on `go` (or its closing, which
// ends it), so that the events are open on its pid before it runs anything.
struct Child {
  int pid = -1;
  int go = -1;     // write end: one byte lets it exec
  int failed = -1; // read end: errno of a failed exec, or EOF once exec succeeded
};

Result<Child> spawn(const std::vector<std::string>& argv) {
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
  if (pid < 0) return Error::plain(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(127); // the recorder gave up
    ::execvp(args[0], args.data());
    const int err = errno;
    [[maybe_unused]] ssize_t n = ::write(failed[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(go[0]);
  ::close(failed[1]);
  return Child{pid, go[1], failed[0]};
}

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 0;
}

bool alive(int pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
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

Result<Recording> record(const RecordOptions& o, const std::atomic<bool>* stop) {
  Target target;
  Child child;
  if (o.system_wide) {
    target.kind = Target::System;
  } else if (!o.pids.empty()) {
    target.kind = Target::Processes;
    for (int pid : o.pids)
      if (pid <= 0 || !alive(pid)) return Error::plain(fmt::format("no process {}", pid));
    target.pids = o.pids;
  } else if (!o.command.empty()) {
    auto c = spawn(o.command);
    if (!c) return std::move(c).error();
    child = *c;
    target.pids = {child.pid};
  } else {
    return Error::plain("nothing to record: give a command, -p PID or -a");
  }
  auto opened = EventSet::open(o.sampling, target);
  if (!opened) {
    if (child.pid > 0) { // it exits on the closed pipe without running anything
      ::close(child.go);
      ::close(child.failed);
      ::waitpid(child.pid, nullptr, 0);
    }
    return std::move(opened).error();
  }
  EventSet events = std::move(*opened);
  Recording rec;
  rec.kernel = events.kernel();
  rec.note = events.note();
  rec.profile.keep_timeline(o.keep_timeline);
  perf::SampleUnwinderOptions uo;
  uo.backend = o.backend;
  uo.max_depth = o.max_depth;
  uo.debug_dirs = o.debug_dirs;
  uo.kernel = events.kernel();
  rec.unwinder = std::make_unique<perf::SampleUnwinder>(perf::RecordingInfo{}, uo);
  // /proc/kallsyms (a hundred thousand lines) is read while the command runs, not after it:
  // the profile can be named the moment the command ends.
  std::future<perf::KernelSymbols> kernel_names;
  if (events.kernel())
    kernel_names = std::async(std::launch::async, [] { return perf::KernelSymbols::load(""); });
  const Clock::time_point start = Clock::now();
  if (child.pid > 0) {
    const char go = 1;
    [[maybe_unused]] ssize_t n = ::write(child.go, &go, 1);
    ::close(child.go);
    int err = 0;
    const bool exec_failed = ::read(child.failed, &err, sizeof err) == sizeof err;
    ::close(child.failed);
    if (exec_failed) {
      ::waitpid(child.pid, nullptr, 0);
      return Error::plain(fmt::format("cannot run {}: {}", o.command[0], std::strerror(err)));
    }
  } else {
    events.enable();
    // What already runs: the processes given, or every process for -a.
    const std::vector<int> running =
        target.kind == Target::System ? proc_numeric_entries("/proc").value_or(std::vector<int>{})
                                      : target.pids;
    for (int pid : running)
      describe_running(pid, *rec.unwinder);
  }
  Drain drain(events, *rec.unwinder, rec.profile);
  bool child_done = false;
  // The command's exit wakes the loop at once (a pidfd polls readable when it exits), so that
  // the profile is ready the moment it ends; without pidfds (before Linux 5.3) within 100 ms.
  const int pidfd = child.pid > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, child.pid, 0)) : -1;
  for (;;) {
    events.wait(100, pidfd);
    drain();
    if (stop && stop->load()) break;
    if (o.duration > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= o.duration)
      break;
    if (child.pid > 0) {
      int status = 0;
      if (::waitpid(child.pid, &status, WNOHANG) == child.pid) {
        rec.exit_status = exit_status(status);
        child_done = true;
        break;
      }
    } else if (target.kind == Target::Processes &&
               std::none_of(target.pids.begin(), target.pids.end(), alive)) {
      break;
    }
  }
  rec.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (pidfd >= 0) ::close(pidfd);
  events.disable();
  drain();
  if (child.pid > 0 && !child_done) { // stopped early: the command ends as under perf record
    ::kill(child.pid, SIGTERM);
    int status = 0;
    // A second SIGINT (Ctrl-C again, or a group-wide kill) interrupts the wait: wait again.
    while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
    rec.exit_status = exit_status(status);
  }
  rec.ring_records = drain.records();
  if (kernel_names.valid()) rec.unwinder->set_kernel_symbols(kernel_names.get());
  return rec;
}

} // namespace ehelf::record
