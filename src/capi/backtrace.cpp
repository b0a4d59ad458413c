#include "capi/backtrace.hpp"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <new>
#include <pthread.h>
#include <sys/mman.h>

#include "capi/address_space.hpp"

namespace ehelf::capi {

namespace {

// ---- unw_backtrace's rule caches -----------------------------------------------------------

// A thread's rule cache for unw_backtrace's fast walk. It lives in pages of its own (mmap, which
// is async-signal-safe: a thread's first unw_backtrace may be in a signal handler, where malloc
// is not allowed) and is unmapped when the thread exits (g_rules_key's destructor).
struct ThreadRules {
  const LocalSpace* space = nullptr; // the space whose modules the rules describe
  // A walk is using `rules`: a signal handler that interrupted it must not change them under it.
  volatile sig_atomic_t busy = 0;
  RuleCache rules;
};

// One pointer of static TLS: initial-exec, so that reading it never calls __tls_get_addr, which
// may allocate the first time a thread touches a dlopened library's TLS.
thread_local ThreadRules* t_rules __attribute__((tls_model("initial-exec"))) = nullptr;

// glibc keeps a thread's values of keys below this (PTHREAD_KEY_2NDLEVEL_SIZE) in the thread
// descriptor; for higher keys pthread_setspecific callocs a block on a thread's first use.
constexpr pthread_key_t kKeysStoredInline = 32;

pthread_key_t g_rules_key;
// The key exists and pthread_setspecific stores it without allocating. Otherwise (a program that
// made 32 keys before us) a thread's cache outlives the thread.
bool g_rules_key_usable = false;

void unmap_thread_rules(void* rules) {
  t_rules = nullptr; // a later unw_backtrace on this thread (another key's destructor) maps anew
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ::munmap(rules, sizeof(ThreadRules));
}

} // namespace

void create_rules_key() {
  static bool done = false;
  if (done) return;
  done = true;
  g_rules_key_usable = ::pthread_key_create(&g_rules_key, unmap_thread_rules) == 0 &&
                       g_rules_key < kKeysStoredInline;
}

namespace {

// The calling thread's ThreadRules, mapped on first use; null if mmap failed.
ThreadRules* thread_rules() {
  if (t_rules) return t_rules;
  void* p = ::mmap(nullptr, sizeof(ThreadRules), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* rules = new (p) ThreadRules;
  if (g_rules_key_usable) ::pthread_setspecific(g_rules_key, rules);
  t_rules = rules;
  return rules;
}

// The calling thread's cache, marked busy and holding rules of `s` only (after a rebuild of the
// space, the old rules may describe unloaded code); null when there is none or it is busy, i.e.
// this call interrupted a walk of this thread.
ThreadRules* claim_rules(const LocalSpace& s) {
  ThreadRules* rules = thread_rules();
  if (!rules || rules->busy) return nullptr;
  rules->busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (rules->space != &s) {
    rules->rules.clear();
    rules->space = &s;
  }
  return rules;
}

void release_rules(ThreadRules& rules) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  rules.busy = 0;
}

// ---- unw_backtrace ------------------------------------------------------------------------

// The ranges unw_backtrace's walk reads: the thread's stack, and the alternate signal stack when
// the walk starts on it (a walk starting on the thread's stack never reaches it, and asking
// costs a system call).
void backtrace_ranges(uint64_t sp, LocalMemory& mem) {
  AddressRange stack = current_thread_stack();
  if (stack.contains(sp, 8))
    mem.add(stack);
  else
    local_ranges(mem);
}

bool in_ranges(const LocalMemory& mem, uint64_t sp) {
  for (const DirectRange& r : mem.ranges())
    if (sp >= r.begin && sp < r.end) return true;
  return false;
}

static_assert(sizeof(void*) == sizeof(uint64_t), "pcs are written to the void* buffer in place");

// The fast walk, with the thread's rule cache, straight into `buffer`. Returns the frame count,
// or -1 when step_walk should do it: the cache is in use (a signal handler interrupted a walk)
// or the walk stopped where a step may get further (memory outside the stack ranges, which
// step_walk reads with process_vm_readv; a return address with no FDE before it).
// `unknown_end`: the walk ended at a pc in no known module (left out of the list).
int direct_walk(LocalSpace& s, const RegisterState& regs, const LocalMemory& mem, void** buffer,
                int size, bool& unknown_end) {
  ThreadRules* rules = claim_rules(s);
  if (!rules) return -1;
  auto* pcs = reinterpret_cast<uint64_t*>(buffer); // the library is built -fno-strict-aliasing
  StopReason why = StopReason::None;
  size_t n = 0;
  try {
    // As deep as the caller's buffer, as libunwind's.
    n = FastWalk(s.walker, &rules->rules).direct(regs, mem, pcs, static_cast<size_t>(size), &why);
  } catch (...) { // only error paths allocate (their messages)
    why = StopReason::BadRead;
  }
  release_rules(*rules);
  if (why == StopReason::BadRead || why == StopReason::NoTable) return -1;
  // Every pc but the last was unwound, so is in a known module; the last ends the list when it
  // is in none, as in step_walk.
  unknown_end = why == StopReason::NoModule && n > 0 && !known_pc(s.map, pcs[n - 1]);
  return static_cast<int>(unknown_end ? n - 1 : n);
}

// The walk step by step (no rule cache), reading memory outside the stack ranges too.
int step_walk(LocalSpace& s, RegisterState regs, SelfMemory& mem, void** buffer, int size,
              bool& unknown_end) {
  FrameInfo info;
  bool exact = false; // the caller's pc is a return address
  int n = 0;
  try {
    while (n < size) {
      if (!known_pc(s.map, regs.get(x86_64::RIP))) {
        unknown_end = true;
        break;
      }
      buffer[n++] = reinterpret_cast<void*>(regs.get(x86_64::RIP));
      if (s.walker.step(regs, mem, exact, info, nullptr) != StopReason::None) break;
      exact = info.signal_frame;
    }
  } catch (...) { // only error paths allocate (their messages)
  }
  return n;
}

// unw_backtrace's list in space `s`: the fast walk where it can, else the step walk.
int backtrace_in(LocalSpace& s, const WalkStart& caller, void** buffer, int size,
                 bool& unknown_end) {
  RegisterState regs;
  regs.set(x86_64::RIP, caller.pc);
  regs.set(x86_64::RSP, caller.sp);
  regs.set(x86_64::RBP, caller.bp);
  regs.set(x86_64::RBX, caller.bx);
  SelfMemory mem;
  backtrace_ranges(caller.sp, mem.stacks);
  unknown_end = false;
  if (in_ranges(mem.stacks, caller.sp)) {
    int n = direct_walk(s, regs, mem.stacks, buffer, size, unknown_end);
    if (n >= 0) return n;
  }
  return step_walk(s, regs, mem, buffer, size, unknown_end);
}

} // namespace

// Reads the space only: no staleness check (dl_iterate_phdr takes the loader's lock, which a
// profiler's handler may have interrupted), no allocation; a list ends at a pc in no module the
// space knows (see address_space.hpp).
int backtrace_from(const WalkStart& caller, void** buffer, int size) {
  if (!buffer || size <= 0) return 0;
  LocalSpace* s = local_space();
  if (!s) return 0;
  bool unknown_end = false;
  return backtrace_in(*s, caller, buffer, size, unknown_end);
}

} // namespace ehelf::capi
