// One unwinder under test. Each peer_*.cpp adds its unwinders to the list; main.cpp runs them
// all from the same call site on the same chains.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// The caller's registers in DWARF order (src/runtime/capture_context.S, shared with the runtime).
extern "C" void ehelf_capture_context(uint64_t regs[17]);

namespace bench {

struct Peer {
  std::string name;
  std::string cold_means; // what "caches cleared" means for this unwinder
  // Called once, on the thread that will be unwound, before any measurement. Returns an empty
  // string or why the peer cannot run (it is then reported as skipped).
  std::string (*init)() = nullptr;
  // Called (untimed) before each cold unwind: drop whatever the unwinder caches. May be null.
  void (*flush)() = nullptr;
  // Captures the calling thread's registers and walks its stack: pcs[0] is a pc in this
  // function, then the return addresses of its callers. Returns the frame count. With
  // `record` false an unwinder whose API does not produce a pc array itself may skip copying
  // one out (ehelf fills FrameInfo records), so that hot timings measure the walk only.
  size_t (*once)(uint64_t* pcs, size_t max, bool record) = nullptr;
  std::string note; // set by init: anything the table should say about this peer
};

// The calling thread's stack [lo, hi), from pthread_getattr_np.
void thread_stack(uint64_t& lo, uint64_t& hi);

void add_fp_peers(std::vector<Peer>& peers);
void add_gcc_peers(std::vector<Peer>& peers);
#ifdef BENCH_EHELF
void add_ehelf_peers(std::vector<Peer>& peers);
#endif
#ifdef BENCH_LIBUNWIND
void add_libunwind_peers(std::vector<Peer>& peers);
#endif
#ifdef BENCH_DWFL
void add_dwfl_peers(std::vector<Peer>& peers);
#endif
#ifdef BENCH_LLVM
void add_llvm_peers(std::vector<Peer>& peers);
#endif
#ifdef BENCH_EHELF_CAPI
void add_capi_peers(std::vector<Peer>& peers);
#endif

// The peer named "libgcc _Unwind_Backtrace" (looked up in libgcc_s.so.1 itself: libunwind.so and
// LLVM's libunwind.a define the same symbol) is also the reference every peer is checked against.
inline constexpr const char* kReferencePeer = "libgcc _Unwind_Backtrace";

} // namespace bench
