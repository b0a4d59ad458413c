// One unwinder under test, walking the user stacks of a recording's samples from their registers
// and stack copies. main.cpp runs every peer over the same samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "recording.hpp"
#include "runtime/unwind_rule.hpp"

namespace table1 {

// Why a walk ended: at the end of the stack (the outermost frame), or for `reason` (a static
// string; the peer's own words: its stop reason, error code or message). ehelf's peers give their
// StopReason instead, named when the tables are written (text()): not on the measured path.
struct Stop {
  bool end_of_stack = false;
  const char* reason = nullptr;
  ehelf::StopReason why = ehelf::StopReason::None;
  const char* text() const;
};

class Peer {
public:
  virtual ~Peer() = default;
  virtual const char* name() const = 0;
  // Readies the peer for samples of a process with these modules (timed as setup: loading
  // tables, address spaces, sessions).
  virtual void prepare(const Maps& maps) = 0;
  // Walks one sample: pcs[0] is its ip, then return addresses. Returns the frame count.
  virtual size_t unwind(const Sample& s, uint64_t* pcs, size_t max, Stop& stop) = 0;
  // Anything the table should say about this peer (e.g. modules without an eh_elf).
  virtual std::string note() const { return {}; }
};

// ehelf: the fast walk (what ehelf perf runs) and the general walk with each backend.
void add_ehelf_peers(std::vector<std::unique_ptr<Peer>>& peers);
// libunwind (nongnu) remote over the sample's copy, as perf's unwind-libunwind: cached and
// UNW_CACHE_NONE.
void add_libunwind_peers(std::vector<std::unique_ptr<Peer>>& peers);
// elfutils libdwfl with sample callbacks, as perf's unwind-libdw.
void add_dwfl_peers(std::vector<std::unique_ptr<Peer>>& peers);

inline constexpr const char* kDepthLimit = "depth limit";

} // namespace table1
