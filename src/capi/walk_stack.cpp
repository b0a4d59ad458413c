#include "capi/walk_stack.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <pthread.h>
#include <sys/mman.h>

#include "capi/thread_exit_key.hpp"

extern "C" int ehelf_capi_call_on_stack(int (*fn)(void*), void* arg, void* stack_top);

namespace ehelf::capi {

namespace {

constexpr size_t kPage = 4096;
// A walk needs about 10 KiB (measured by tests/capi/stack_use.c on the caller's stack); a
// level has far more, because a signal handler that interrupts a walk and has no alternate
// stack runs on this one (a few pages are touched; the rest is address space only).
constexpr size_t kLevelSize = 256 * 1024;
constexpr unsigned kLevels = 4;
// One mapping per thread: a guard page, the levels (level 0 highest), and a page holding the
// header. Pages are touched only when a walk uses them.
constexpr size_t kMappingSize = kPage + kLevels * kLevelSize + kPage;

struct WalkStack {
  // Levels in use (only this thread, and its signal handlers, change it).
  volatile unsigned depth = 0;
  uint8_t* bottom = nullptr;
  uint64_t caller_sp[kLevels] = {}; // where each level's walk was called from

  void* top(unsigned level) const { return bottom + kPage + (kLevels - level) * kLevelSize; }
};

// One pointer of static TLS, as backtrace.cpp's rule cache: reading it never allocates.
thread_local WalkStack* t_walk_stack __attribute__((tls_model("initial-exec"))) = nullptr;

ThreadExitKey g_walk_stack_key;

void unmap_walk_stack(void* header) {
  const WalkStack* ws = static_cast<const WalkStack*>(header);
  t_walk_stack = nullptr; // a later walk on this thread (another key's destructor) maps anew
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ::munmap(ws->bottom, kMappingSize);
}

[[maybe_unused]] WalkStack* thread_walk_stack() { // (unused under ASan: see on_walk_stack)
  if (t_walk_stack) return t_walk_stack;
  void* p = ::mmap(nullptr, kMappingSize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* bottom = static_cast<uint8_t*>(p);
  if (::mprotect(bottom, kPage, PROT_NONE) != 0) { // an overflow faults, corrupts nothing
    ::munmap(p, kMappingSize);
    return nullptr;
  }
  auto* ws = new (bottom + kMappingSize - kPage) WalkStack;
  ws->bottom = bottom;
  g_walk_stack_key.set(ws);
  t_walk_stack = ws;
  return ws;
}

} // namespace

void create_walk_stack_key() {
  g_walk_stack_key.create(unmap_walk_stack);
}

int on_walk_stack(int (*fn)(void*), void* arg) {
#if defined(__SANITIZE_ADDRESS__)
  return fn(arg);
#else
  WalkStack* ws = thread_walk_stack();
  if (!ws || ws->depth >= kLevels) return fn(arg);
  // A signal handler that interrupts us here walks at this level and is done before we go on:
  // levels are taken and given back last in, first out.
  const unsigned level = ws->depth;
  ws->caller_sp[level] = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  ws->depth = level + 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const int result = ehelf_capi_call_on_stack(fn, arg, ws->top(level));
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ws->depth = level;
  return result;
#endif
}

uint64_t sp_outside_walk_stack(uint64_t sp) {
  const WalkStack* ws = t_walk_stack;
  if (!ws) return sp;
  const auto levels_bottom = reinterpret_cast<uint64_t>(ws->bottom) + kPage;
  // A level's caller may itself run on a lower level (nested handlers): at most kLevels hops.
  for (unsigned hops = 0; hops < kLevels && sp - levels_bottom < kLevels * kLevelSize; ++hops)
    sp = ws->caller_sp[kLevels - 1 - (sp - levels_bottom) / kLevelSize];
  return sp;
}

uint64_t walk_caller_sp() {
  return sp_outside_walk_stack(reinterpret_cast<uint64_t>(__builtin_frame_address(0)));
}

AddressRange walk_stack_range() {
  const WalkStack* ws = t_walk_stack;
  if (!ws) return {};
  const auto levels_bottom = reinterpret_cast<uint64_t>(ws->bottom) + kPage;
  return AddressRange{levels_bottom, levels_bottom + kLevels * kLevelSize};
}

} // namespace ehelf::capi
