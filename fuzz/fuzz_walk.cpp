// libFuzzer target: the fast walk (Unwinder::backtrace_direct, backtrace_local, backtrace_sample)
// over a stack made of the input, with this process's real unwind tables and one rule cache kept
// across inputs (so links learnt on one input are wrong on the next). Every read must stay inside
// the input's copy (AddressSanitizer's redzones around it catch any other) and every walk must end.
//
// Input: 8 header bytes (start pc choice, sp offset, rbp choice, flags), then the stack. Stack
// words whose top 16 bits are 0xeeee become real code addresses (a table's range starts, +1 as a
// return address would be), 0xeeed words become pointers into the stack, so that the fuzzer can
// build chains the tables accept.
//
// Where the fast walk and the general walk (Unwinder::backtrace, step by step, no rule cache)
// both reach the outermost frame, they must give the same frames (one definition of
// a step).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/unwinder.hpp"

namespace {

struct World {
  ehelf::ModuleMap map = ehelf::ModuleMap::for_self();
  std::vector<uint64_t> pcs; // code addresses with unwind entries
  ehelf::Unwinder* unwinder = nullptr;
  ehelf::RuleCache own;
  World() {
    ehelf::LoadPolicy policy;
    policy.compiled = false; // no eh_elf cache in a fuzzer run
    map.load_all(policy);
    for (const ehelf::Module& m : map.modules()) {
      if (!m.data || !m.data->has_table()) continue;
      const auto& ranges = m.data->table->ranges();
      for (size_t i = 0; i < ranges.size(); i += 1 + ranges.size() / 4096)
        if (ranges[i].begin + m.bias >= m.start && ranges[i].begin + m.bias < m.end)
          pcs.push_back(ranges[i].begin + m.bias);
    }
    ehelf::UnwinderOptions o;
    o.allow_loading = false;
    o.max_depth = 256;
    unwinder = new ehelf::Unwinder(map, o);
    ehelf::UnwinderOptions g = o;
    g.use_cache = false;
    g.backend = ehelf::BackendKind::Table;
    general = new ehelf::Unwinder(map, g);
  }
  ehelf::Unwinder* general = nullptr;
};

// The general walk's pcs from `regs` over `memory`, and why it stopped.
size_t general_walk(World& w, const ehelf::RegisterState& regs, ehelf::LocalMemory memory,
                    ehelf::FrameAddress first, uint64_t* pcs, size_t max, ehelf::StopReason& why) {
  ehelf::FrameInfo frames[256];
  const size_t n = w.general->backtrace(regs, memory, frames, max < 256 ? max : 256, &why, first);
  for (size_t i = 0; i < n; ++i)
    pcs[i] = frames[i].pc;
  return n;
}

void same_or_abort(const uint64_t* fast, size_t nf, ehelf::StopReason wf, const uint64_t* general,
                   size_t ng, ehelf::StopReason wg) {
  if (wf != ehelf::StopReason::EndOfStack || wg != ehelf::StopReason::EndOfStack) return;
  if (nf != ng || std::memcmp(fast, general, nf * sizeof *fast) != 0) std::abort();
}

World& world() {
  static World w;
  return w;
}

uint64_t u16(const uint8_t* p) {
  return uint64_t(p[0]) | uint64_t(p[1]) << 8;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = world();
  if (size < 8 + 16 || w.pcs.empty()) return 0;
  const uint8_t* header = data;
  // The stack, in a heap block of exactly its size.
  std::vector<uint8_t> stack(data + 8, data + size);
  const size_t words = stack.size() / 8;
  const uint64_t base = 0x7ffd00000000; // where the stack "was"
  for (size_t i = 0; i < words; ++i) {
    uint64_t v;
    std::memcpy(&v, stack.data() + 8 * i, 8);
    if ((v >> 48) == 0xeeee)
      v = w.pcs[(v & 0xffffffff) % w.pcs.size()] + ((v >> 32) & 1);
    else if ((v >> 48) == 0xeeed)
      v = base + (v & 0xffffffff) % stack.size();
    std::memcpy(stack.data() + 8 * i, &v, 8);
  }
  const uint8_t flags = header[7];
  const ehelf::FrameAddress first =
      (flags & 8) ? ehelf::FrameAddress::Exact : ehelf::FrameAddress::ReturnAddress;
  ehelf::RegisterState regs;
  regs.set(ehelf::x86_64::RIP, w.pcs[u16(header) % w.pcs.size()] + (flags & 1));
  const uint64_t sp_off = (u16(header + 2) % stack.size()) & ~uint64_t(flags & 2 ? 0 : 7);
  const uint64_t bp_off = u16(header + 4) % stack.size();
  uint64_t pcs[256];
  ehelf::StopReason why;
  if (flags & 4) { // at the copy's own address: backtrace_local reads it directly
    const uint64_t lo = reinterpret_cast<uint64_t>(stack.data());
    ehelf::WalkStart start{regs.get(ehelf::x86_64::RIP), lo + sp_off, lo + bp_off,
                           uint64_t(header[6])};
    const size_t max = 1 + header[6];
    const size_t n = w.unwinder->backtrace_local(start, ehelf::AddressRange{lo, lo + stack.size()},
                                                 pcs, max, &why, first);
    regs.set(ehelf::x86_64::RSP, start.sp);
    regs.set(ehelf::x86_64::RBP, start.bp);
    regs.set(ehelf::x86_64::RBX, start.bx);
    uint64_t other[256];
    ehelf::StopReason why_general;
    const size_t m =
        general_walk(w, regs, ehelf::LocalMemory(ehelf::AddressRange{lo, lo + stack.size()}), first,
                     other, max, why_general);
    same_or_abort(pcs, n, why, other, m, why_general);
  } else { // at `base`, read through the range's delta, as a perf sample's copy
    regs.set(ehelf::x86_64::RSP, base + sp_off);
    if (flags & 16) regs.set(ehelf::x86_64::RBP, base + bp_off);
    if (flags & 32) regs.set(ehelf::x86_64::RBX, header[6]);
    ehelf::LocalMemory memory;
    memory.add(ehelf::AddressRange{base, base + stack.size()},
               static_cast<int64_t>(reinterpret_cast<uint64_t>(stack.data()) - base));
    const size_t n = w.unwinder->backtrace_direct(regs, memory, pcs, 256, &why, first,
                                                  (flags & 64) ? &w.own : nullptr);
    uint64_t other[256];
    ehelf::StopReason why_general;
    const size_t m = general_walk(w, regs, memory, first, other, 256, why_general);
    same_or_abort(pcs, n, why, other, m, why_general);
    // A perf sample's walk (backtrace_sample): the copy from rsp up, in a heap block of its own
    // (AddressSanitizer's redzones on both sides), against the general walk over that range.
    const std::vector<uint8_t> copy(stack.begin() + static_cast<ptrdiff_t>(sp_off), stack.end());
    const size_t k = w.unwinder->backtrace_sample(regs, copy, pcs, 1 + header[6], &why, first);
    ehelf::LocalMemory from_sp;
    if (!copy.empty())
      from_sp.add(ehelf::AddressRange{base + sp_off, base + stack.size()},
                  static_cast<int64_t>(reinterpret_cast<uint64_t>(copy.data()) - base - sp_off));
    const size_t g = general_walk(w, regs, from_sp, first, other, 1 + header[6], why_general);
    same_or_abort(pcs, k, why, other, g, why_general);
  }
  if (flags == 0xff) w.unwinder->clear_cache();
  return 0;
}
