// The in-kernel walk's table builder: a file's unwind rows for the BPF program (its segments too,
// for each mapping's bias), built on a thread of its own so that a large file does not hold up
// the processes whose files are known already (KernelWalk publishes those at once).
#pragma once

#include <compare>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bpf/bpf_rows.hpp"
#include "elf/elf_file.hpp"
#include "runtime/module_map.hpp"
#include "support/result.hpp"

namespace ehelf::bpf {

// Which file a mapping shows: its identity as the kernel sees it, and when it last changed (a
// file rewritten in place is another file).
struct FileKey {
  uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0;
  std::string vdso; // "[vdso]" (one image for every process: the same kernel)
  auto operator<=>(const FileKey&) const = default;
};

// What building a file's rows gives: its segments (for the bias of each mapping), its rows or why
// there are none (then rbp is followed in its code); `elf` false when it is no ELF file.
struct BuiltTable {
  bool elf = false;
  std::vector<Segment> segments;
  Result<BpfTable> rows = Error::plain("not built");
};

// Builds the rows of the file at `path`, or of `image` when not empty (the vDSO, read from the
// process).
BuiltTable build_table(const std::string& path, std::vector<uint8_t> image,
                       const LoadPolicy& policy);

// Builds tables off the reader's thread, so that a large file (cc1: 478,579 rows, ~150 ms) does
// not hold up the processes whose files are known already: their mappings are published at once,
// and this file's samples stop at "table not loaded yet" until its rows are. Each job owns a
// descriptor of the file (it may be gone from the process by then); a finished one wakes the
// reader through an eventfd.
//
// Which job first: a file a process maps (wanted) before one built on speculation (preloaded:
// what most programs map), and the smaller file first, so that a library dlopen'd now is not
// queued behind libLLVM. Two threads, at most one of them on a speculative job: a wanted file
// never waits for a speculative build (with ASan under load, ehelf's own libraries' preloads held
// up a dlopen'd library's table for ~0.4 s).
class TableBuilder {
public:
  struct Job {
    uint64_t serial = 0;
    FileKey key;
    int fd = -1; // closed by the builder
    LoadPolicy policy;
    bool wanted = true; // a process maps it (else: preloaded on speculation)
  };
  struct Done {
    uint64_t serial = 0;
    FileKey key;
    BuiltTable table;
    std::exception_ptr failure; // what the build threw (memory exhausted): rethrown by take()
  };

  TableBuilder();
  ~TableBuilder();                  // stops the threads; closes the descriptors of jobs not started
  int fd() const { return event_; } // readable when a build finished

  void submit(Job job);       // starts the threads with the first job
  void want(uint64_t serial); // a speculative job a process now maps: wanted (if not started)

  // The builds finished since the last call (reads the eventfd); a build that threw rethrows here.
  std::vector<Done> take();

private:
  void run();                             // a builder thread
  std::optional<size_t> next_job() const; // in jobs_, under the mutex; nullopt: none to start
  static constexpr size_t kThreads = 2;

  int event_ = -1;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Job> jobs_;
  std::vector<Done> done_;
  bool stop_ = false;
  bool speculating_ = false;         // a thread builds a speculative job
  std::vector<std::thread> workers_; // started by the first job; last, so that they stop first
};

} // namespace ehelf::bpf
