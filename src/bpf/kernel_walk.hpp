// KernelWalk: the in-kernel walk (unwind.bpf.c, seed 004) loaded, fed and read. It attaches the
// BPF program to sampling perf events; each sample's user stack is walked in the kernel with rows
// built here from ehelf's model (bpf_rows.hpp) and counted there; what leaves the kernel is the
// counted stacks' addresses.
//
// Tables are per file (device, inode, size, mtime), shared by every process mapping it; each
// process has its sorted list of mappings (address -> file + bias). Both are loaded on demand:
// a sample in a process, or at an address, without one sends a request, which serve_requests()
// answers from /proc/PID/maps; refresh_process() does it when the side band says a process
// mapped code or exec'd. Tables of files no process maps any more are freed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/result.hpp"

namespace ehelf::bpf {

struct KernelWalkOptions {
  uint32_t max_depth = 512;
  bool kernel_stacks = true; // also keep the kernel's stack of each sample (bpf_get_stackid)
  // Hand every Nth sample to perf too, with its stack copy (0: none): the copy mode in which the
  // user-space walk of the same samples checks the kernel's.
  uint32_t copy_every = 0;
  // Where the walk finds a pc's file: false (the default) in the process's mappings read from
  // /proc/PID/maps (a search of a sorted list), the kernel's own mapping of it (bpf_find_vma)
  // only for a pc outside them (a process between its exec and that read, a library dlopen'd
  // since); true: always the kernel's, once per file a walk meets (what the fallback does,
  // for every sample: how the tests hold it to copy mode).
  bool find_mappings_only = false;
  // A sample whose walk stops for want of a table (its process's mappings, a file's rows) waits
  // in the kernel, its stack's first 16 KiB with it, and is walked again once they are loaded
  // (replay_parked): false counts it as it stopped.
  bool park = true;
  std::vector<std::string> debug_dirs; // where separate debug files are looked up first
};

// The walk's stop reasons (bpf_walk.h's ehelf_walk_stop): 12 of them.
inline constexpr unsigned kWalkStopCount = 12;
std::string_view walk_stop_name(unsigned stop); // "end of stack", "no table yet", ...

// One stack counted in the kernel since the last drain.
struct KernelStack {
  uint32_t pid = 0, tid = 0;
  std::string comm;
  uint64_t samples = 0, period = 0;
  std::vector<uint64_t> kernel; // innermost first (empty without kernel frames)
  std::vector<uint64_t> user;   // the sampled pc, then return addresses
  unsigned stop = 0;            // why the walk ended (walk_stop_name)
  // When the kernel first sampled the process's address space (CLOCK_MONOTONIC ns, 0: no user
  // stack): its user pcs are named with the mappings the process had then.
  uint64_t space_since = 0;
};

// A sample also handed to perf (copy mode): the kernel's walk of it and the registers it began
// from (which the perf sample's own registers say again: how the two are matched).
struct CopiedWalk {
  uint32_t tid = 0;
  uint64_t ip = 0, sp = 0;
  uint64_t time = 0;          // when the program began with the sample (CLOCK_MONOTONIC ns)
  bool parked = false;        // walked again from the sample's parked stack (its first 16 KiB)
  bool parents_space = false; // sampled in its parent's address space (vfork: the parent's stack)
  std::vector<uint64_t> user;
  unsigned stop = 0;
  unsigned outside = 0; // frames stepped by following rbp from code in no mapping it knew
};

struct KernelWalkStats {
  uint64_t samples = 0, frames = 0;
  std::array<uint64_t, kWalkStopCount> stops{}; // walks by why they ended
  std::array<uint64_t, 16> not_expressible{};   // STOP rows met, by NotExpressible reason
  uint64_t requests_lost = 0, counts_full = 0, stacks_full = 0, copies_lost = 0;
  // Samples that waited in the kernel for their tables, those the queue had no room for, and
  // those walked again and counted (of which `replay_stops` by why they ended then).
  uint64_t parked = 0, park_full = 0, replayed = 0;
  // Mappings the kernel found itself (bpf_find_vma: a pc in none of those written here) whose
  // file had a published table, and those whose file had none yet; of the first, the
  // interpreter's found by the process's aux vector.
  uint64_t found_files = 0, found_unknown = 0, found_interpreter = 0;
  // Frames whose row was not in the program's row cache, and its reads of the sampled stacks.
  uint64_t row_misses = 0, stack_reads = 0;
  // Frames taken from the CPU's last walk (their words read again and found the same), and the
  // times its step was not taken: the words had changed.
  uint64_t memo_frames = 0, memo_changed = 0;
  uint64_t files = 0, rows = 0, row_bytes = 0; // tables loaded now (bytes: page indexes too)
  uint64_t largest_file_rows = 0;
  std::string largest_file;
  uint64_t processes = 0, mappings = 0; // processes with mappings loaded now
  uint64_t requests = 0;                // requests answered
  uint64_t programs_kept = 0; // programs that ended while samples of them waited (program_ended)
  uint64_t bytes_read = 0;    // what user space read from the maps (drains, copies)
  // The program's runs and their time, as the kernel counts them while
  // /proc/sys/kernel/bpf_stats_enabled is 1 (0 otherwise).
  uint64_t runs = 0, run_time_ns = 0;
  uint64_t replay_runs = 0, replay_time_ns = 0; // ... and of the replay of parked samples
  std::string replay_error; // why the replay could not be loaded (its samples never counted)
};

// A mapping of code as the side band's records described it (PERF_RECORD_MMAP2).
struct SideBandMapping {
  uint64_t start = 0, end = 0, offset = 0;
  std::string path;
  std::string build_id; // hex (empty: unknown, the file is not taken)
};

// Why this process cannot load the walk (empty: it can): root, or CAP_BPF with CAP_PERFMON.
std::string kernel_walk_unavailable();

class KernelWalk {
public:
  // Loads the program (refused: the error ends with the verifier log's last lines).
  static Result<std::unique_ptr<KernelWalk>> load(const KernelWalkOptions& options);
  ~KernelWalk();
  KernelWalk(const KernelWalk&) = delete;
  KernelWalk& operator=(const KernelWalk&) = delete;

  // Runs the program on every sample of a perf event (and of the events it is inherited by).
  Status attach(int perf_event_fd);
  // Reads the process's mappings and loads the tables they need, now.
  void refresh_process(uint32_t pid);
  // A forked child: its parent's mappings (a fork copies the address space), so that its first
  // samples walk before anything reads its /proc/PID/maps; a parent not read yet is read first.
  // Nothing when the child already has its own (its exec was seen first) or the parent is gone.
  void inherit_process(uint32_t parent, uint32_t child);
  // Loads the tables of these files and keeps them for the whole run (the files most processes
  // map, the command about to run), so that their first samples walk at once: now, or (`now`
  // false) on the builder's thread.
  void preload_files(const std::vector<std::string>& paths, bool now);
  // The same in two halves, so that the tables can be built while the program loads: building
  // (any thread, no walk needed), then installing what was built (a file changed since is built
  // again).
  struct PreparedFiles;
  static std::shared_ptr<PreparedFiles> prepare_files(const std::vector<std::string>& paths,
                                                      const std::vector<std::string>& debug_dirs);
  void preload_prepared(PreparedFiles& prepared);
  // While held, the program drops every sample (none walked, counted or handed to perf).
  void hold_samples(bool held);
  // Whether tables of files processes map are being built off this thread (serve_requests
  // installs them when done); preloaded files, built on speculation, are not waited for.
  bool tables_building() const;
  // The process is gone: its mappings are dropped, and the tables only it used.
  void forget_process(uint32_t pid);
  // Whether samples of the process wait in the kernel for their tables (parked).
  bool samples_waiting(uint32_t pid) const;
  // A program of the process ended at `until` (CLOCK_MONOTONIC ns: its exec of another, or its
  // exit), begun at `since` (its exec or fork; 0: before the recording): while samples of it wait
  // in the kernel, they walk with the mappings it had: its entry's when read while it ran, else
  // `side_band`'s (a file whose build ID is not the one mapped then is left out).
  void program_ended(uint32_t pid, const std::vector<SideBandMapping>& side_band, uint64_t since,
                     uint64_t until);
  // Answers the program's requests (processes and files without tables yet). Call often.
  void serve_requests();
  // Polls readable when the program has sent requests: a loop waiting on it answers at once.
  int requests_fd() const;
  // Polls readable when tables built off this thread are ready (serve_requests installs them).
  int built_fd() const;
  // Walks the samples waiting for their tables again (those whose tables are loaded now are
  // counted; the others wait on, at most 5 s), or with `final` counts them all as they end now.
  // Nothing when none waits. Call after serve_requests.
  void replay_parked(bool final);
  // Every stack counted since the last drain.
  void drain(const std::function<void(const KernelStack&)>& use);
  // Copy mode: the walks of samples handed to perf too, since the last call.
  void take_copies(const std::function<void(const CopiedWalk&)>& use);
  KernelWalkStats stats() const;

private:
  void replay(bool final); // replay_parked's runs
  struct State;
  explicit KernelWalk(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

} // namespace ehelf::bpf
