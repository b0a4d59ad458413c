#include "runtime/unwinder.hpp"

#include <algorithm>
#include <cstring>

namespace ehelf {

std::string_view backend_name(BackendKind b) {
  switch (b) {
  case BackendKind::Auto: return "auto";
  case BackendKind::Compiled: return "compiled";
  case BackendKind::Table: return "table";
  case BackendKind::Interpreter: return "interp";
  }
  return "?";
}

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
  case StopReason::None: return "none";
  case StopReason::EndOfStack: return "end of stack";
  case StopReason::NoModule: return "pc in no known module";
  case StopReason::NoTable: return "no unwind entry for the pc";
  case StopReason::BadRead: return "memory read refused";
  case StopReason::MissingRegister: return "a needed register is unknown";
  case StopReason::CfaNotGrowing: return "stack pointer did not grow";
  case StopReason::DepthLimit: return "depth limit";
  case StopReason::RuleFailed: return "unwind rule failed";
  }
  return "?";
}

StopReason Unwinder::apply_compact(const CompactRule& rule, RegisterState& regs,
                                   MemoryReader& mem) {
  unsigned base_reg = rule.kind == CompactRule::CfaRsp ? x86_64::RSP : x86_64::RBP;
  if (!regs.has(base_reg)) return StopReason::MissingRegister;
  uint64_t cfa = regs.get(base_reg) + static_cast<uint64_t>(int64_t(rule.cfa_offset));
  uint64_t rip = 0, rbp = regs.get(x86_64::RBP), rbx = regs.get(x86_64::RBX);
  if (rule.rip != CompactRule::AtCfa) {
    regs.clear(x86_64::RIP);
  } else {
    if (!mem.read_u64(cfa + static_cast<uint64_t>(int64_t(rule.rip_offset)), rip))
      return StopReason::BadRead;
  }
  if (rule.rbp == CompactRule::AtCfa &&
      !mem.read_u64(cfa + static_cast<uint64_t>(int64_t(rule.rbp_offset)), rbp))
    return StopReason::BadRead;
  if (rule.rbx == CompactRule::AtCfa &&
      !mem.read_u64(cfa + static_cast<uint64_t>(int64_t(rule.rbx_offset)), rbx))
    return StopReason::BadRead;
  if (rule.rip == CompactRule::AtCfa) regs.set(x86_64::RIP, rip);
  if (rule.rbp == CompactRule::AtCfa) regs.set(x86_64::RBP, rbp);
  else if (rule.rbp == CompactRule::Unknown) regs.clear(x86_64::RBP);
  if (rule.rbx == CompactRule::AtCfa) regs.set(x86_64::RBX, rbx);
  else if (rule.rbx == CompactRule::Unknown) regs.clear(x86_64::RBX);
  regs.set(x86_64::RSP, cfa);
  return StopReason::None;
}

bool Unwinder::fill_hot(uint64_t lookup) {
  if (options_.backend != BackendKind::Auto && options_.backend != BackendKind::Table) return false;
  const Module* mod = map_.find(lookup);
  if (!mod) return false;
  const ModuleData* data = mod->data.get();
  if (!data) {
    if (!options_.allow_loading) return false;
    data = &map_.load(*mod, options_.policy);
  }
  if (!data->compact.ranges()) return false;
  const CompactRule& rule = data->compact.lookup(lookup - mod->bias);
  return make_hot(rule, lookup, cache_[cache_index(lookup)]);
}

bool Unwinder::make_hot(const CompactRule& rule, uint64_t pc, HotRule& out) {
  if (rule.kind != CompactRule::CfaRsp && rule.kind != CompactRule::CfaRbp) return false;
  HotRule h;
  h.pc = pc;
  if (rule.rip == CompactRule::Unknown) { // the outermost frame (_start): the walk ends here
    h.base = 2;
    out = h;
    return true;
  }
  if (rule.rip != CompactRule::AtCfa || rule.rip_offset != -8) return false;
  auto small = [](int16_t off) { return off % 8 == 0 && off / 8 >= INT8_MIN && off / 8 <= INT8_MAX; };
  h.cfa_offset = rule.cfa_offset;
  h.base = rule.kind == CompactRule::CfaRbp ? 1 : 0;
  if (rule.rbp == CompactRule::AtCfa) {
    if (!small(rule.rbp_offset)) return false;
    h.op |= kHotRbpSaved;
    h.rbp_offset8 = static_cast<int8_t>(rule.rbp_offset / 8);
  } else if (rule.rbp == CompactRule::Unknown) {
    return false; // rare: left to the slow path, so the hot loop never changes validity
  }
  if (rule.rbx == CompactRule::AtCfa) {
    if (!small(rule.rbx_offset)) return false;
    h.op |= kHotRbxSaved;
    h.rbx_offset8 = static_cast<int8_t>(rule.rbx_offset / 8);
  } else if (rule.rbx == CompactRule::Unknown) {
    return false;
  }
  out = h;
  return true;
}

StopReason Unwinder::apply_hot(const HotRule& h, RegisterState& regs, MemoryReader& mem) {
  CompactRule rule;
  if (h.base == 2) {
    regs.clear(x86_64::RIP);
    return StopReason::None; // step() reports the end of the stack
  }
  rule.kind = h.base == 1 ? CompactRule::CfaRbp : CompactRule::CfaRsp;
  rule.cfa_offset = h.cfa_offset;
  rule.rip = CompactRule::AtCfa;
  rule.rip_offset = -8;
  rule.rbp = (h.op & kHotRbpSaved) ? CompactRule::AtCfa : CompactRule::Same;
  rule.rbp_offset = static_cast<int16_t>(8 * h.rbp_offset8);
  rule.rbx = (h.op & kHotRbxSaved) ? CompactRule::AtCfa : CompactRule::Same;
  rule.rbx_offset = static_cast<int16_t>(8 * h.rbx_offset8);
  return apply_compact(rule, regs, mem);
}

StopReason Unwinder::interpret(const ModuleData& data, uint64_t svma, RegisterState& regs,
                               MemoryReader& mem, bool& signal_frame) {
  const TableRange* r = data.table->find(svma);
  if (!r) return StopReason::NoTable;
  const FunctionInfo& fn = data.table->function(r->function);
  signal_frame = fn.signal_frame;
  auto step = data.table->evaluate(r->row, regs, mem, fn.return_column);
  if (!step) {
    const std::string& m = step.error().message;
    if (m.find("cannot read") != std::string::npos) return StopReason::BadRead;
    if (m.find("not known") != std::string::npos || m.find("no known value") != std::string::npos)
      return StopReason::MissingRegister;
    return StopReason::RuleFailed;
  }
  regs = step->caller;
  return StopReason::None;
}

namespace {
int deref_through(uint64_t addr, uint64_t* value, void* arg) {
  return static_cast<MemoryReader*>(arg)->read_u64(addr, *value) ? 0 : 1;
}
constexpr unsigned kDwarfOfSlot[EHELF_NREGS] = {16, 7, 6, 3, 12, 13, 14, 15};
} // namespace

StopReason Unwinder::run_compiled(const ModuleData& data, uint64_t svma, RegisterState& regs,
                                  MemoryReader& mem, bool& signal_frame, bool& fallback) {
  ehelf_context_t ctx{};
  unsigned nslots = data.compiled->info().register_set == EHELF_REGISTERS_MINIMAL ? 4 : 8;
  for (unsigned s = 0; s < nslots; ++s)
    if (regs.has(kDwarfOfSlot[s])) {
      ctx.regs[s] = regs.get(kDwarfOfSlot[s]);
      ctx.flags |= EHELF_VALID(s);
    }
  int rc = data.compiled->unwind_remote(svma, &ctx, deref_through, &mem);
  switch (rc) {
  case EHELF_OK: break;
  case EHELF_NEEDS_INTERPRETER: fallback = true; return StopReason::None;
  case EHELF_NO_ENTRY: return StopReason::NoTable;
  case EHELF_BAD_READ: return StopReason::BadRead;
  case EHELF_MISSING_REGISTER: return StopReason::MissingRegister;
  default: return StopReason::RuleFailed;
  }
  signal_frame = (ctx.flags & EHELF_FLAG_SIGNAL_FRAME) != 0;
  for (unsigned s = 0; s < nslots; ++s) {
    if (ctx.flags & EHELF_VALID(s)) regs.set(kDwarfOfSlot[s], ctx.regs[s]);
    else regs.clear(kDwarfOfSlot[s]);
  }
  return StopReason::None;
}

StopReason Unwinder::frame_pointer_step(RegisterState& regs, MemoryReader& mem) {
  // Code compiled with frame pointers: [rbp] = caller's rbp, [rbp+8] = return address.
  if (!regs.has(x86_64::RBP)) return StopReason::NoTable;
  uint64_t rbp = regs.get(x86_64::RBP), caller_rbp = 0, rip = 0;
  if (!mem.read_u64(rbp, caller_rbp) || !mem.read_u64(rbp + 8, rip)) return StopReason::BadRead;
  regs.set(x86_64::RSP, rbp + 16);
  regs.set(x86_64::RBP, caller_rbp);
  regs.set(x86_64::RIP, rip);
  return StopReason::None;
}

StopReason Unwinder::step(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info) {
  if (!regs.has(x86_64::RIP)) return StopReason::EndOfStack;
  if (!regs.has(x86_64::RSP)) return StopReason::MissingRegister;
  uint64_t pc = regs.get(x86_64::RIP);
  uint64_t sp = regs.get(x86_64::RSP);
  info = FrameInfo{};
  info.pc = pc;
  info.sp = sp;
  uint64_t lookup = exact_pc ? pc : pc - 1;
  bool signal_frame = false;
  StopReason r = StopReason::None;

  HotRule* slot = nullptr;
  bool cacheable = options_.use_cache && (options_.backend == BackendKind::Table ||
                                          options_.backend == BackendKind::Auto);
  if (cacheable) {
    slot = &cache_[cache_index(lookup)];
    if (slot->pc == lookup) {
      info.module = map_.find(lookup);
      info.backend = BackendKind::Table;
      r = apply_hot(*slot, regs, mem);
      goto done;
    }
  }
  {
    const Module* mod = map_.find(lookup);
    info.module = mod;
    if (!mod) return StopReason::NoModule;
    const ModuleData* data = mod->data.get();
    if (!data) {
      if (!options_.allow_loading) return StopReason::NoTable;
      data = &map_.load(*mod, options_.policy);
    }
    if (!data->has_table()) {
      if (!options_.frame_pointer_fallback) return StopReason::NoTable;
      info.via_frame_pointer = true;
      r = frame_pointer_step(regs, mem);
      goto done;
    }
    uint64_t svma = lookup - mod->bias;
    BackendKind b = options_.backend;
    if (b == BackendKind::Auto) b = data->compiled ? BackendKind::Compiled : BackendKind::Table;
    if (b == BackendKind::Compiled && !data->compiled) b = BackendKind::Table;
    info.backend = b;
    if (b == BackendKind::Compiled) {
      bool fallback = false;
      r = run_compiled(*data, svma, regs, mem, signal_frame, fallback);
      if (fallback) {
        info.backend = BackendKind::Interpreter;
        r = interpret(*data, svma, regs, mem, signal_frame);
      }
      // The cache sits in front of every backend: later visits of this pc take the compact
      // rule (same table, same answer) without calling into the eh_elf.
      if (slot && r == StopReason::None && data->compact.ranges()) {
        const CompactRule& rule = data->compact.lookup(svma);
        make_hot(rule, lookup, *slot);
      }
    } else if (b == BackendKind::Table) {
      const CompactRule& rule = data->compact.lookup(svma);
      if (rule.kind == CompactRule::NoEntry) {
        // The compact table may not have been built (LoadPolicy.compact off): ask the model.
        if (data->compact.ranges() == 0) {
          info.backend = BackendKind::Interpreter;
          r = interpret(*data, svma, regs, mem, signal_frame);
        } else {
          r = StopReason::NoTable;
        }
      } else if (rule.kind == CompactRule::Interpret) {
        info.backend = BackendKind::Interpreter;
        r = interpret(*data, svma, regs, mem, signal_frame);
      } else {
        if (slot) make_hot(rule, lookup, *slot);
        signal_frame = rule.signal_frame;
        r = apply_compact(rule, regs, mem);
      }
    } else {
      r = interpret(*data, svma, regs, mem, signal_frame);
    }
  }
done:
  info.signal_frame = signal_frame;
  if (r != StopReason::None) return r;
  if (!regs.has(x86_64::RIP) || regs.get(x86_64::RIP) == 0) return StopReason::EndOfStack;
  if (!regs.has(x86_64::RSP)) return StopReason::MissingRegister;
  // The stack grows down, so callers' frames are above: a walk that does not move up is looping
  // (signal frames may switch stacks, e.g. from an alternate signal stack, and are exempt).
  if (!signal_frame && regs.get(x86_64::RSP) <= sp) return StopReason::CfaNotGrowing;
  return StopReason::None;
}

size_t Unwinder::backtrace(RegisterState regs, MemoryReader& mem, FrameInfo* out, size_t max,
                           StopReason* why, bool exact_first) {
  size_t n = 0;
  bool exact = exact_first;
  StopReason r = StopReason::None;
  size_t limit = std::min(max, options_.max_depth);
  while (n < limit) {
    FrameInfo info;
    r = step(regs, mem, exact, info);
    if (info.pc || r == StopReason::None) out[n++] = info;
    if (r != StopReason::None) break;
    exact = info.signal_frame; // after a signal frame the pc is the interrupted instruction
  }
  if (n == limit && r == StopReason::None) r = StopReason::DepthLimit;
  if (why) *why = r;
  return n;
}

} // namespace ehelf

namespace ehelf {

size_t Unwinder::backtrace_local(const RegisterState& start, AddressRange stack, uint64_t* pcs,
                                 size_t max, StopReason* why, bool exact_first) {
  size_t limit = std::min(max, options_.max_depth);
  StopReason r = StopReason::None;
  if (!start.has(x86_64::RIP) || !start.has(x86_64::RSP)) {
    if (why) *why = StopReason::MissingRegister;
    return 0;
  }
  uint64_t pc = start.get(x86_64::RIP), sp = start.get(x86_64::RSP);
  uint64_t bp = start.get(x86_64::RBP), bx = start.get(x86_64::RBX);
  bool bp_ok = start.has(x86_64::RBP), bx_ok = start.has(x86_64::RBX);
  const uint64_t lo = stack.begin, hi_minus_8 = stack.end >= 8 ? stack.end - 8 : 0;
  bool exact = exact_first;
  size_t n = 0;
  // One unsigned compare checks both bounds (the range is validated below).
  const uint64_t span = hi_minus_8 >= lo ? hi_minus_8 - lo : 0;
  auto load = [&](uint64_t addr, uint64_t& out) {
    if (addr - lo > span) return false;
    std::memcpy(&out, reinterpret_cast<const void*>(addr), 8);
    return true;
  };
  // Stack bounds checked once here, so each load needs a single unsigned compare.
  if (stack.end < stack.begin + 8) {
    if (why) *why = StopReason::BadRead;
    return 0;
  }
  if (limit == 0) {
    if (why) *why = StopReason::DepthLimit;
    return 0;
  }
  pcs[n++] = pc;
  for (;;) {
    uint64_t lookup = exact ? pc : pc - 1;
    const HotRule& e = cache_[cache_index(lookup)];
    if (e.pc == lookup) {
      if (e.base > 1) {
        r = StopReason::EndOfStack;
        break;
      }
      if (e.base == 1 && !bp_ok) {
        r = StopReason::MissingRegister;
        break;
      }
      uint64_t cfa = (e.base ? bp : sp) + static_cast<uint64_t>(int64_t(e.cfa_offset));
      uint64_t next_pc;
      if (!load(cfa - 8, next_pc)) {
        r = StopReason::BadRead;
        break;
      }
      if (e.op & kHotRbpSaved) {
        if (!load(cfa + 8 * int64_t(e.rbp_offset8), bp)) {
          r = StopReason::BadRead;
          break;
        }
        bp_ok = true;
      }
      if (e.op & kHotRbxSaved) {
        if (!load(cfa + 8 * int64_t(e.rbx_offset8), bx)) {
          r = StopReason::BadRead;
          break;
        }
        bx_ok = true;
      }
      if (cfa <= sp || next_pc == 0) {
        r = next_pc == 0 ? StopReason::EndOfStack : StopReason::CfaNotGrowing;
        break;
      }
      sp = cfa;
      pc = next_pc;
      exact = false;
      if (n == limit) break;
      pcs[n++] = pc;
      continue;
    }
    // Cold path: fill the cache from the module's compact table and take the fast path.
    if (options_.use_cache && fill_hot(lookup)) continue;
    // Slow path: the general step (signal frames, expressions, frame pointers...).
    RegisterState regs;
    regs.set(x86_64::RIP, pc);
    regs.set(x86_64::RSP, sp);
    if (bp_ok) regs.set(x86_64::RBP, bp);
    if (bx_ok) regs.set(x86_64::RBX, bx);
    LocalMemory mem(stack);
    FrameInfo info;
    r = step(regs, mem, exact, info);
    if (r != StopReason::None) break;
    pc = regs.get(x86_64::RIP);
    sp = regs.get(x86_64::RSP);
    bp_ok = regs.has(x86_64::RBP);
    bp = regs.get(x86_64::RBP);
    bx_ok = regs.has(x86_64::RBX);
    bx = regs.get(x86_64::RBX);
    exact = info.signal_frame;
    if (n == limit) break;
    pcs[n++] = pc;
  }
  if (n == limit && r == StopReason::None) r = StopReason::DepthLimit;
  if (why) *why = r;
  return n;
}

} // namespace ehelf
