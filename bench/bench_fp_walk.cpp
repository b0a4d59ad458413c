// bench_fp_walk: the in-kernel walk's peer in the record_kernel benchmark. Samples a command as
// `ehelf record --unwind kernel` does (a cpu-clock event per CPU for the command and the threads
// and processes it makes, at -F Hz), each sample walked by the kernel's own frame-pointer walk of
// the user stack in a BPF program (record/fp_walk.bpf.c: bpf_get_stackid, BPF_F_USER_STACK, the
// walk of bpftrace's ustack and bcc's profile), and prints the program's run time per sample
// (the kernel's BPF statistics, as ehelf's summary gives its own) and the frames walked:
//
//   bench_fp_walk [-F HZ] -- CMD ARGS...
//   fp walk: N runs, X ns each, F frames each
//
// Needs root (or CAP_BPF and CAP_PERFMON); exits 2 with one line on stderr when the kernel
// refuses, or when the command could not run or failed (its samples would measure something else).
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "fp_walk.skel.h"

namespace {

constexpr int kMaxFrames = 127; // fp_walk.bpf.c's FP_WALK_MAX_FRAMES

struct Key {
  unsigned pid;
  unsigned tid;
  int stack;
  unsigned reserved;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_fp_walk: %s\n", what.c_str());
  std::exit(2);
}

// The command's cpu-clock event on `cpu`, inherited by what it starts, enabled at its exec, as
// ehelf's (record/event_set.cpp). Not opened by EventSet: its events ask for the kernel's
// callchain (PERF_SAMPLE_CALLCHAIN, user frames excluded), and on such an event bpf_get_stackid
// takes the chain the kernel made before the program ran instead of walking the stack itself:
// its user part empty, and the walk's time outside the program's.
int open_event(pid_t pid, int cpu, unsigned long hz) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.freq = 1;
  a.sample_freq = hz;
  a.inherit = 1;
  a.disabled = 1;
  a.enable_on_exec = 1;
  return static_cast<int>(::syscall(SYS_perf_event_open, &a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// Frames in the stacks map's entry `id` (the walk leaves the rest of the entry zero).
int frames_of(int stacks_fd, int id) {
  unsigned long long pcs[kMaxFrames] = {};
  const unsigned key = static_cast<unsigned>(id);
  if (bpf_map_lookup_elem(stacks_fd, &key, pcs) != 0) return 0;
  int n = 0;
  while (n < kMaxFrames && pcs[n] != 0)
    ++n;
  return n;
}

} // namespace

int main(int argc, char** argv) {
  unsigned long hz = 999;
  int at = 1;
  for (; at < argc && std::strcmp(argv[at], "--") != 0; ++at) {
    if (std::strcmp(argv[at], "-F") == 0) {
      if (at + 1 >= argc) fail("-F needs a frequency in Hz");
      char* end = nullptr;
      hz = std::strtoul(argv[++at], &end, 10);
      if (*end != '\0' || hz == 0 || hz > 100000) fail(std::string("bad -F: ") + argv[at]);
    } else {
      fail(std::string("unknown argument: ") + argv[at] + " (usage: bench_fp_walk [-F HZ] -- CMD)");
    }
  }
  if (at + 1 >= argc) fail("no command (usage: bench_fp_walk [-F HZ] -- CMD ARGS...)");
  char** command = argv + at + 1;

  fp_walk_bpf* skel = fp_walk_bpf__open_and_load();
  if (skel == nullptr)
    fail(std::string("the kernel refused the BPF program: ") + std::strerror(errno));
  const int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME); // while open: run_time_ns counts
  if (stats_fd < 0) fail(std::string("BPF statistics: ") + std::strerror(errno));

  // The command waits on a pipe until its events are attached: every sample of it is walked.
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) fail(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) fail(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    char byte = 0;
    ::close(go[1]);
    if (::read(go[0], &byte, 1) != 1) ::_exit(127);
    ::execvp(command[0], command);
    std::fprintf(stderr, "bench_fp_walk: %s: %s\n", command[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(go[0]);
  std::vector<bpf_link*> links;
  // Every possible CPU, as ehelf (an offline one's open fails: skipped).
  const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
  for (int cpu = 0; cpu < cpus; ++cpu) {
    const int fd = open_event(child, cpu, hz);
    if (fd < 0 && errno == ENODEV) continue;
    if (fd < 0) {
      ::kill(child, SIGKILL);
      fail(std::string("perf_event_open: ") + std::strerror(errno));
    }
    bpf_link* link = bpf_program__attach_perf_event(skel->progs.fp_walk_sample, fd);
    if (link == nullptr) {
      ::kill(child, SIGKILL);
      fail(std::string("attaching the program: ") + std::strerror(errno));
    }
    links.push_back(link);
  }
  if (links.empty()) {
    ::kill(child, SIGKILL);
    fail("perf_event_open: no CPU could be sampled");
  }
  const char byte = 1;
  if (::write(go[1], &byte, 1) != 1)
    fail(std::string("starting the command: ") + std::strerror(errno));
  ::close(go[1]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail(std::string(command[0]) + ": " +
         (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                            : "killed by signal " + std::to_string(WTERMSIG(status))));
  for (bpf_link* link : links)
    bpf_link__destroy(link);

  bpf_prog_info info{};
  unsigned info_size = sizeof(info);
  if (bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.fp_walk_sample), &info, &info_size) != 0)
    fail(std::string("the program's statistics: ") + std::strerror(errno));
  const int counts_fd = bpf_map__fd(skel->maps.counts);
  const int stacks_fd = bpf_map__fd(skel->maps.stacks);
  unsigned long long walked = 0, frames = 0;
  Key key{}, next{};
  const Key* previous = nullptr;
  while (bpf_map_get_next_key(counts_fd, previous, &next) == 0) {
    key = next;
    previous = &key;
    unsigned long long count = 0;
    if (bpf_map_lookup_elem(counts_fd, &key, &count) != 0) continue;
    walked += count;
    if (key.stack >= 0)
      frames += count * static_cast<unsigned long long>(frames_of(stacks_fd, key.stack));
  }
  const double each = info.run_cnt ? static_cast<double>(info.run_time_ns) / info.run_cnt : 0.0;
  std::printf("fp walk: %llu runs, %.0f ns each, %.1f frames each\n",
              static_cast<unsigned long long>(info.run_cnt), each,
              walked ? static_cast<double>(frames) / walked : 0.0);
  ::close(stats_fd);
  fp_walk_bpf__destroy(skel);
  return 0;
}
