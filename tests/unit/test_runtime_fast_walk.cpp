// The pcs-only fast walk (Unwinder::backtrace_local / backtrace_direct with the linked rule
// cache) against the general walk (Unwinder::backtrace, no cache) on call chains that change
// from walk to walk, so that cached links are right, wrong and relearnt; from a stack snapshot
// read through a delta; through a frame whose CFA needs rbx; and on garbage stacks made of real
// return addresses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "runtime/local.hpp"
#include "runtime/unwinder.hpp"

extern "C" void ehelf_test_rbx_cfa_frame(void (*callback)());

namespace ehelf {
namespace {

__attribute__((no_sanitize_address, noinline)) void copy_raw(void* dst, const void* src, size_t n) {
  auto* d = static_cast<volatile uint8_t*>(dst);
  auto* s = static_cast<const volatile uint8_t*>(src);
  for (size_t i = 0; i < n; ++i)
    d[i] = s[i];
}

ModuleMap& loaded_map() {
  static ModuleMap map = [] {
    ModuleMap m = ModuleMap::for_self();
    m.load_all();
    return m;
  }();
  return map;
}

// One walk of the current stack, every way.
struct Walks {
  std::vector<uint64_t> reference; // Unwinder::backtrace, no rule cache
  StopReason reference_why = StopReason::None;
  std::vector<std::vector<uint64_t>> fast; // each fast variant
  std::vector<StopReason> fast_why;
};

Unwinder& shared_fast_unwinder() {
  static Unwinder u(loaded_map()); // one cache across all walks: links are learnt and broken
  return u;
}

__attribute__((noinline)) void walk_here(Walks& w) {
  RegisterState regs = capture_local();
  WalkStart start{regs.get(x86_64::RIP), regs.get(x86_64::RSP), regs.get(x86_64::RBP),
                  regs.get(x86_64::RBX)};
  AddressRange stack = current_thread_stack();
  {
    UnwinderOptions o;
    o.use_cache = false;
    o.backend = BackendKind::Table;
    Unwinder general(loaded_map(), o);
    LocalMemory mem(stack);
    FrameInfo frames[256];
    size_t n =
        general.backtrace(regs, mem, frames, 256, &w.reference_why, FrameAddress::ReturnAddress);
    for (size_t i = 0; i < n; ++i)
      w.reference.push_back(frames[i].pc);
  }
  Unwinder& u = shared_fast_unwinder();
  uint64_t pcs[256];
  StopReason why = StopReason::None;
  auto add = [&](size_t n) {
    w.fast.emplace_back(pcs, pcs + n);
    w.fast_why.push_back(why);
  };
  add(u.backtrace_local(regs, stack, pcs, 256, &why, FrameAddress::ReturnAddress));
  add(u.backtrace_local(start, stack, pcs, 256, &why,
                        FrameAddress::ReturnAddress)); // warm now: links followed
  // A perf-style sample: the stack copied elsewhere, read through the range's delta.
  uint64_t sp = start.sp;
  std::vector<uint8_t> copy(stack.end - sp); // the whole used stack, so the walks agree
  copy_raw(copy.data(), reinterpret_cast<const void*>(sp), copy.size());
  LocalMemory snapshot;
  snapshot.add(AddressRange{sp, sp + copy.size()},
               static_cast<int64_t>(reinterpret_cast<uint64_t>(copy.data()) - sp));
  RuleCache own; // a caller's own cache (as one per thread)
  add(u.backtrace_direct(regs, snapshot, pcs, 256, &why, FrameAddress::ReturnAddress, &own));
  add(u.backtrace_direct(regs, snapshot, pcs, 256, &why, FrameAddress::ReturnAddress, &own));
  asm volatile("" ::: "memory");
}

void expect_same(const Walks& w, const std::string& what) {
  ASSERT_GE(w.reference.size(), 4u) << what;
  for (size_t i = 0; i < w.fast.size(); ++i) {
    EXPECT_EQ(w.fast[i], w.reference) << what << ", variant " << i << " of " << w.fast.size();
    EXPECT_EQ(stop_reason_name(w.fast_why[i]), stop_reason_name(w.reference_why))
        << what << ", variant " << i;
  }
}

// Chains through qsort with two comparators, so the same libc return addresses have different
// callers from walk to walk.
int g_levels_left = 0;
Walks* g_walks = nullptr;
int cmp_a(const void* a, const void* b);
int cmp_b(const void* a, const void* b);
const int* g_plan = nullptr;

__attribute__((noinline)) void level(int which) {
  int v[4] = {4, 3, 2, 1};
  qsort(v, 4, sizeof v[0], which ? cmp_b : cmp_a);
  asm volatile("" ::: "memory");
}

bool g_walked = false;
int g_descended_at = -1;

__attribute__((noinline)) int descend(const void* a, const void* b) {
  // Descend on the first comparison of each level; walk once, at the bottom.
  if (!g_walked && g_descended_at != g_levels_left) {
    g_descended_at = g_levels_left;
    if (g_levels_left > 0) {
      --g_levels_left;
      level(g_plan[g_levels_left]);
    } else {
      g_walked = true;
      walk_here(*g_walks);
    }
  }
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}
int cmp_a(const void* a, const void* b) {
  return descend(a, b) + 0;
}
__attribute__((noinline)) int cmp_b(const void* a, const void* b) {
  int r = descend(b, a);
  asm volatile("" ::: "memory");
  return -r;
}

// Walks at the bottom of a chain of depth plan.size() - 1 (plan[i]: which comparator level i
// uses), every way.
Walks walk_chain(const std::vector<int>& plan) {
  Walks w;
  g_walks = &w;
  g_plan = plan.data();
  g_levels_left = static_cast<int>(plan.size()) - 1;
  g_walked = false;
  g_descended_at = -1;
  level(plan.back());
  g_walks = nullptr;
  return w;
}

TEST(FastWalk, MatchesTheGeneralWalkOnChangingChains) {
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    int depth = 1 + int(rng() % 12);
    std::vector<int> plan(size_t(depth) + 1);
    for (int& p : plan)
      p = int(rng() % 2);
    Walks w = walk_chain(plan);
    expect_same(w, "round " + std::to_string(round) + ", depth " + std::to_string(depth));
    if (HasFailure()) break;
  }
}

__attribute__((noinline)) void walk_from_callback() {
  // Make this frame save rbx, so the rbx the rbx-based frame above needs is in memory.
  asm volatile("xor %%ebx, %%ebx" ::: "rbx");
  walk_here(*g_walks);
  asm volatile("" ::: "memory"); // not a tail call: this frame stays between the two
}

TEST(FastWalk, HandsAWalkThatNeedsRbxToTheGeneralWalk) {
  for (int pass = 0; pass < 2; ++pass) { // the second pass with a warm cache
    Walks w;
    g_walks = &w;
    ehelf_test_rbx_cfa_frame(walk_from_callback);
    g_walks = nullptr;
    expect_same(w, "pass " + std::to_string(pass));
    // The walk went through the rbx frame to the test's own frames and beyond.
    EXPECT_GE(w.reference.size(), 6u);
    EXPECT_NE(w.reference_why, StopReason::MissingRegister);
  }
}

__attribute__((noinline)) void deeper_rbx_frame() {
  // As walk_from_callback, with a second frame that needs rbx above: the walk takes frames again
  // with every register twice, each time from where the last re-walk left it.
  asm volatile("xor %%ebx, %%ebx" ::: "rbx");
  ehelf_test_rbx_cfa_frame(walk_from_callback);
  asm volatile("" ::: "memory");
}

TEST(FastWalk, TakesFramesAgainPastEachFrameThatNeedsRbx) {
  for (int pass = 0; pass < 2; ++pass) {
    Walks w;
    g_walks = &w;
    ehelf_test_rbx_cfa_frame(deeper_rbx_frame);
    g_walks = nullptr;
    expect_same(w, "pass " + std::to_string(pass));
    // Both rbx frames are in the walk, and it went on past the outer one.
    const auto rbx_frame = reinterpret_cast<uint64_t>(&ehelf_test_rbx_cfa_frame);
    size_t in_rbx_frame = 0, past = 0;
    for (size_t i = 1; i < w.reference.size(); ++i) {
      const uint64_t pc = w.reference[i];
      if (pc > rbx_frame && pc - rbx_frame < 32) {
        ++in_rbx_frame;
        past = w.reference.size() - 1 - i;
      }
    }
    EXPECT_EQ(in_rbx_frame, 2u);
    EXPECT_GE(past, 3u);
    EXPECT_NE(w.reference_why, StopReason::MissingRegister);
  }
}

TEST(FastWalk, GarbageMadeOfRealReturnAddressesStaysInside) {
  // Learn real return addresses (and train the cache and its links) from a real chain.
  Walks real = walk_chain({0, 1, 0, 1});
  ASSERT_GE(real.reference.size(), 6u);
  Unwinder& u = shared_fast_unwinder();
  std::vector<uint64_t> buffer(2048);
  const uint64_t lo = reinterpret_cast<uint64_t>(buffer.data());
  const uint64_t hi = lo + 8 * buffer.size();
  std::mt19937_64 rng(5);
  for (int round = 0; round < 3000; ++round) {
    for (auto& w : buffer) {
      switch (rng() % 4) {
      case 0:
      case 1:
        w = real.reference[rng() % real.reference.size()];
        break;
      case 2:
        w = lo + 8 * (rng() % buffer.size()) + (rng() % 3 == 0 ? rng() % 8 : 0);
        break;
      default:
        w = rng();
      }
    }
    WalkStart start{real.reference[rng() % real.reference.size()], lo + 8 * (rng() % buffer.size()),
                    buffer[rng() % buffer.size()], buffer[rng() % buffer.size()]};
    uint64_t pcs[64];
    StopReason why;
    size_t n =
        u.backtrace_local(start, AddressRange{lo, hi}, pcs, 64, &why, FrameAddress::ReturnAddress);
    ASSERT_LE(n, 64u);
    ASSERT_GE(n, 1u);
    if (n == 64) {
      EXPECT_EQ(why, StopReason::DepthLimit);
    }
  }
}

// On garbage stacks made of real return addresses, the fast walk (backtrace_direct over the
// range, backtrace_sample over the copy from rsp up) gives the general walk's frames, pc for pc,
// and its reason to stop, with a depth limit below and above what the stack can hold
// (the depth counted or not), and over copies cut to a few bytes or none. A walk taken up after the
// quick path stopped mid-stack is checked by the signal-frame tests (SignalUnwind.*: the
// trampoline's rule is not cacheable).
TEST(FastWalk, GarbageWalksEqualTheGeneralWalk) {
  Walks real = walk_chain({1, 1, 0, 1});
  ASSERT_GE(real.reference.size(), 6u);
  Unwinder& u = shared_fast_unwinder();
  UnwinderOptions o;
  o.use_cache = false;
  o.backend = BackendKind::Table;
  Unwinder general(loaded_map(), o);
  std::vector<uint64_t> buffer(512);
  const uint64_t lo = 0x7ff000000000; // the stack's addresses, read at the buffer (a delta)
  const uint64_t hi = lo + 8 * buffer.size();
  LocalMemory memory;
  memory.add(AddressRange{lo, hi},
             static_cast<int64_t>(reinterpret_cast<uint64_t>(buffer.data()) - lo));
  std::mt19937_64 rng(17);
  size_t compared = 0, deep = 0;
  for (int round = 0; round < 4000; ++round) {
    for (auto& w : buffer)
      w = rng() % 3 ? real.reference[rng() % real.reference.size()]
                    : lo + 8 * (rng() % buffer.size());
    RegisterState regs;
    regs.set(x86_64::RIP, real.reference[rng() % real.reference.size()]);
    regs.set(x86_64::RSP, lo + 8 * (rng() % 64));
    regs.set(x86_64::RBP, buffer[rng() % buffer.size()]);
    regs.set(x86_64::RBX, buffer[rng() % buffer.size()]);
    const FrameAddress first = rng() % 2 ? FrameAddress::Exact : FrameAddress::ReturnAddress;
    for (const size_t limit : {size_t(8), size_t(1024)}) {
      std::vector<FrameInfo> frames(limit);
      StopReason general_why = StopReason::None, fast_why = StopReason::None;
      const size_t n = general.backtrace(regs, memory, frames.data(), limit, &general_why, first);
      std::vector<uint64_t> pcs(limit);
      const size_t m = u.backtrace_direct(regs, memory, pcs.data(), limit, &fast_why, first);
      std::vector<uint64_t> expected;
      for (size_t i = 0; i < n; ++i)
        expected.push_back(frames[i].pc);
      pcs.resize(m);
      ASSERT_EQ(pcs, expected) << "round " << round << ", limit " << limit;
      ASSERT_EQ(stop_reason_name(fast_why), stop_reason_name(general_why)) << "round " << round;
      ++compared;
      deep += n >= 4;
      // A perf sample's walk (backtrace_sample) over the copy from rsp up: the general walk's
      // over that range.
      const uint64_t sp = regs.get(x86_64::RSP);
      LocalMemory from_sp;
      from_sp.add(AddressRange{sp, hi},
                  static_cast<int64_t>(reinterpret_cast<uint64_t>(buffer.data()) - lo));
      const size_t g = general.backtrace(regs, from_sp, frames.data(), limit, &general_why, first);
      pcs.assign(limit, 0);
      const std::span<const uint8_t> copy(
          reinterpret_cast<const uint8_t*>(buffer.data()) + (sp - lo), hi - sp);
      const size_t k = u.backtrace_sample(regs, copy, pcs.data(), limit, &fast_why, first);
      expected.clear();
      for (size_t i = 0; i < g; ++i)
        expected.push_back(frames[i].pc);
      pcs.resize(k);
      ASSERT_EQ(pcs, expected) << "sample walk, round " << round << ", limit " << limit;
      ASSERT_EQ(stop_reason_name(fast_why), stop_reason_name(general_why)) << "round " << round;
      // The same copy cut short, down to empty (a sample whose stack copy holds a few bytes
      // or none): the general walk's over what is left, or over nothing.
      const size_t cut = rng() % 24;
      LocalMemory cut_memory;
      if (cut != 0)
        cut_memory.add(AddressRange{sp, sp + cut},
                       static_cast<int64_t>(reinterpret_cast<uint64_t>(buffer.data()) - lo));
      const size_t c =
          general.backtrace(regs, cut_memory, frames.data(), limit, &general_why, first);
      pcs.assign(limit, 0);
      const size_t d =
          u.backtrace_sample(regs, copy.first(cut), pcs.data(), limit, &fast_why, first);
      expected.clear();
      for (size_t i = 0; i < c; ++i)
        expected.push_back(frames[i].pc);
      pcs.resize(d);
      ASSERT_EQ(pcs, expected) << "cut sample walk, round " << round << ", " << cut << " bytes";
      ASSERT_EQ(stop_reason_name(fast_why), stop_reason_name(general_why)) << "round " << round;
    }
  }
  // The garbage makes walks of several frames, not only 1 (~400 of 8,000 under ASan, more in a
  // release build: the return addresses differ).
  EXPECT_GE(deep, 100u) << compared << " walks compared";
}

// A stack copy presented at the very top of the address space (a hostile perf sample's rsp): the
// CFA rsp + offset wraps around to a small address, which the fast walk's end-only bound would
// let through. Such ranges go to the general step, whose reads are all checked.
TEST(FastWalk, StackRangeAtTheTopOfTheAddressSpace) {
  Walks real = walk_chain({1, 0, 1});
  ASSERT_GE(real.reference.size(), 4u);
  Unwinder& u = shared_fast_unwinder();
  std::vector<uint64_t> buffer(512);
  for (size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = real.reference[i % real.reference.size()];
  const uint64_t top = ~uint64_t(0) - 15; // the range ends 16 bytes below 2^64
  const uint64_t lo = top - 8 * buffer.size();
  LocalMemory memory;
  memory.add(AddressRange{lo, top},
             static_cast<int64_t>(reinterpret_cast<uint64_t>(buffer.data()) - lo));
  for (size_t slot = 0; slot < buffer.size(); ++slot)
    for (uint64_t pc : real.reference) {
      RegisterState regs;
      regs.set(x86_64::RIP, pc);
      regs.set(x86_64::RSP, lo + 8 * slot);
      regs.set(x86_64::RBP, lo + 8 * ((slot * 7) % buffer.size()));
      regs.set(x86_64::RBX, 0);
      uint64_t pcs[32];
      StopReason why;
      size_t n = u.backtrace_direct(regs, memory, pcs, 32, &why, FrameAddress::ReturnAddress);
      ASSERT_GE(n, 1u);
      ASSERT_LE(n, 32u);
      // As a perf sample's copy: not read at all (above 2^63), the sampled pc alone.
      const std::span<const uint8_t> copy(
          reinterpret_cast<const uint8_t*>(buffer.data()) + 8 * slot, 8 * (buffer.size() - slot));
      n = u.backtrace_sample(regs, copy, pcs, 32, &why, FrameAddress::ReturnAddress);
      ASSERT_EQ(n, 1u);
    }
}

TEST(FastWalk, ClearedCacheAndTinyLimits) {
  Unwinder& u = shared_fast_unwinder();
  RegisterState regs = capture_local();
  uint64_t pcs[4];
  StopReason why;
  EXPECT_EQ(
      u.backtrace_local(regs, current_thread_stack(), pcs, 0, &why, FrameAddress::ReturnAddress),
      0u);
  EXPECT_EQ(why, StopReason::DepthLimit);
  EXPECT_EQ(
      u.backtrace_local(regs, current_thread_stack(), pcs, 1, &why, FrameAddress::ReturnAddress),
      1u);
  EXPECT_EQ(why, StopReason::DepthLimit);
  u.clear_cache();
  EXPECT_EQ(
      u.backtrace_local(regs, current_thread_stack(), pcs, 4, &why, FrameAddress::ReturnAddress),
      4u);
  EXPECT_EQ(why, StopReason::DepthLimit);
  // A stack range that does not hold rsp: nothing is read, the general step says why.
  EXPECT_EQ(
      u.backtrace_local(regs, AddressRange{16, 4096}, pcs, 4, &why, FrameAddress::ReturnAddress),
      1u);
  EXPECT_EQ(why, StopReason::BadRead);
}

TEST(ModuleMap, GenerationTellsMapsAndChangesApart) {
  ModuleMap a = ModuleMap::for_self();
  ModuleMap b = ModuleMap::for_self();
  EXPECT_NE(a.generation(), b.generation());
  const uint64_t ga = a.generation();
  ModuleMap copy = a; // a copy may load other data objects: not the same generation
  EXPECT_NE(copy.generation(), ga);
  ModuleMap moved = std::move(copy); // a move keeps the modules' data, and the generation
  EXPECT_NE(moved.generation(), ga);
  const uint64_t gm = moved.generation();
  moved.add(Module{});
  EXPECT_NE(moved.generation(), gm);
  const uint64_t added = moved.generation();
  moved.finish();
  EXPECT_NE(moved.generation(), added);
  EXPECT_EQ(a.generation(), ga);
}

// An Unwinder whose map is replaced (the old module data freed) must not fill from the modules
// it remembered: run under ASan, a stale memo is a use after free; otherwise the walk goes wrong.
TEST(FastWalk, ForgetsRememberedModulesWhenTheMapIsReplaced) {
  auto map = std::make_unique<ModuleMap>(ModuleMap::for_self());
  map->load_all();
  Unwinder u(*map);
  for (int round = 0; round < 3; ++round) {
    RegisterState regs = capture_local();
    uint64_t pcs[64];
    StopReason why;
    u.clear_cache(); // every frame fills (the memo is not part of what clear_cache drops)
    size_t n =
        u.backtrace_local(regs, current_thread_stack(), pcs, 64, &why, FrameAddress::ReturnAddress);
    EXPECT_GE(n, 4u) << "round " << round;
    EXPECT_EQ(why, StopReason::EndOfStack) << "round " << round;
    *map = ModuleMap::for_self(); // new data objects: the remembered ones are freed
    map->load_all();
  }
}

} // namespace
} // namespace ehelf

namespace ehelf {
namespace {

// The cached form of every rule gives the step the uncached compact rule gives: every 7th range
// of libc, stepped once to fill the cache and once from it, against an Unwinder without cache.
TEST(RuleCache, CachedStepsEqualTableSteps) {
  ModuleMap& map = loaded_map();
  const Module* libc = nullptr;
  for (const Module& m : map.modules())
    if (m.path.find("libc.so") != std::string::npos && m.data && m.data->has_table()) libc = &m;
  ASSERT_NE(libc, nullptr);
  UnwinderOptions cached_o, plain_o;
  cached_o.backend = plain_o.backend = BackendKind::Table;
  plain_o.use_cache = false;
  Unwinder cached(map, cached_o), plain(map, plain_o);
  std::vector<uint64_t> words(512);
  const uint64_t base = 0x7ff000000000;
  for (size_t i = 0; i < words.size(); ++i)
    words[i] = base + 8 * (i + 3) + (i % 5 == 0 ? 0 : 0x1000);
  SnapshotMemory mem(base, {reinterpret_cast<const uint8_t*>(words.data()), 8 * words.size()});
  size_t compared = 0, hits = 0;
  const auto& ranges = libc->data->table->ranges();
  for (size_t i = 0; i < ranges.size(); i += 7) {
    RegisterState start;
    start.set(x86_64::RIP, ranges[i].begin + libc->bias);
    start.set(x86_64::RSP, base + 8 * 64);
    start.set(x86_64::RBP, base + 8 * 200);
    start.set(x86_64::RBX, 0x1234);
    RegisterState want = start, got = start, again = start;
    FrameInfo info;
    StopReason rw = plain.step(want, mem, true, info);
    StopReason rg = cached.step(got, mem, true, info);
    StopReason ra = cached.step(again, mem, true, info);
    hits += info.backend == BackendKind::Table;
    for (const auto& [r, regs] : {std::pair{rg, got}, std::pair{ra, again}}) {
      ASSERT_EQ(stop_reason_name(r), stop_reason_name(rw)) << std::hex << ranges[i].begin;
      for (unsigned reg : {x86_64::RIP, x86_64::RSP, x86_64::RBP, x86_64::RBX}) {
        ASSERT_EQ(regs.has(reg), want.has(reg)) << std::hex << ranges[i].begin << " r" << reg;
        if (want.has(reg)) {
          ASSERT_EQ(regs.get(reg), want.get(reg)) << std::hex << ranges[i].begin;
        }
      }
    }
    ++compared;
  }
  EXPECT_GT(compared, 1000u);
  EXPECT_GT(hits, compared / 2);
}

} // namespace
} // namespace ehelf
