#include "eh/frames.hpp"

#include "capi/proc_info.hpp"
#include "capi/thread_caches.hpp"
#include "capi/walk_stack.hpp"
#include "eh/proc_cache.hpp"
#include "runtime/memory.hpp"

namespace ehelf::eh {

namespace {

// As in libunwind.cpp, the init and each step (the CFA program's state, expression evaluation:
// about 10 KiB) run on the thread's walk stack, a few hundred bytes of the thrower's (a throw
// from a signal handler on a small alternate stack).

// capi::init_local without its function-entry check (an FDE search on every walk's start:
// each throw's two phases and every _Unwind_Resume): our walks start in our own entry points,
// right after their call to unw_getcontext, a return address by construction.
int init(capi::Cursor& c, const unw_context_t& uc) {
  capi::LocalSpace* s = capi::local_space();
  if (!s) return -UNW_ENOMEM;
  // capi::local_ranges without its sigaltstack system call (on every throw's two phases and
  // every _Unwind_Resume): the stack the walk starts on (the mapping holding the thrower's stack
  // pointer, cached per thread) and the walk stack are read directly. A throw from a handler on
  // an alternate signal stack reads the interrupted stack above it through process_vm_readv
  // (SelfMemory): slower, as correct.
  LocalMemory mem;
  mem.add(thread_stack_at(capi::walk_caller_sp()));
  mem.add(capi::walk_stack_range());
  capi::start_local(c, *s, uc, mem);
  return UNW_ESUCCESS;
}
struct InitArgs {
  capi::Cursor* cursor;
  const unw_context_t* uc;
};
int init_on_walk_stack(capi::Cursor& c, const unw_context_t& uc) {
  InitArgs a{&c, &uc};
  return capi::on_walk_stack(
      [](void* p) {
        auto* args = static_cast<InitArgs*>(p);
        return init(*args->cursor, *args->uc);
      },
      &a);
}
// One step of the cursor's frame, in place: capi::step without what the unwinder does not use
// (each register's save slot, for unw_get_save_loc; the stack ranges set up again per step; rbp
// followed from a caller in no known module; whether the caller's pc is known, which load()
// finds out from its FDE). 1: the caller; 0: the frame is the outermost (its return address
// undefined); other negative values: the frame could not be unwound.
struct StepArgs {
  capi::Cursor* cursor;
  capi::SelfMemory* memory;
  RowCache* rows;
};
int step(capi::Cursor& c, capi::SelfMemory& mem, RowCache* rows) {
  RegisterState regs = c.regs;
  FrameInfo info;
  StopReason r;
  try {
    r = c.local->walker.step_every_register(regs, mem, c.exact, info, nullptr, rows);
  } catch (...) { // only error paths allocate (their messages)
    return -UNW_EUNSPEC;
  }
  if (r == StopReason::EndOfStack) {
    c.done = true;
    return 0;
  }
  if (r != StopReason::None) return -UNW_EBADFRAME;
  c.regs = regs;
  c.exact = info.signal_frame; // after a signal frame the pc is the interrupted instruction
  c.signal_context = 0;        // (resume.cpp's rt_sigreturn is not how a landing is entered)
  return 1;
}
// A row remembered for the frame's pc is applied on the thrower's stack (a few hundred bytes, as
// libgcc's step takes); finding one (the CFA programs, expressions: about 10 KiB) runs on the
// walk stack.
int step_on_walk_stack(capi::Cursor& c, capi::SelfMemory& mem) {
  if (c.done) return 0;
  // (check_late_module ran in load(), for this frame)
  const capi::ClaimedCaches caches(*c.local);
  RowCache* rows = caches.get() ? &caches.get()->rows : nullptr;
  if (rows && rows->find(RuleCache::key(c.regs.get(x86_64::RIP), c.exact)))
    return step(c, mem, rows);
  StepArgs a{&c, &mem, rows};
  return capi::on_walk_stack(
      [](void* p) {
        auto* args = static_cast<StepArgs*>(p);
        return step(*args->cursor, *args->memory, args->rows);
      },
      &a);
}

} // namespace

namespace {
__attribute__((constructor)) void at_load() {
  create_proc_cache_key();
  create_trail_key();
}
} // namespace

bool FrameWalk::start(const unw_context_t& uc) {
  if (init_on_walk_stack(ctx_.cursor, uc) != UNW_ESUCCESS) return false;
  mem_ = capi::local_memory(ctx_.cursor); // the walk's stack ranges, set up once
  (void)load();                           // (the first frame is the entry point's own)
  return true;
}

bool FrameWalk::load() {
  capi::Cursor& c = ctx_.cursor;
  // A late library replaced at this pc is forgotten first (and the caches with it).
  capi::check_late_module(c);
  ctx_.ra = c.regs.get(x86_64::RIP);
  const uint64_t key = ctx_.ra * 2 + (c.exact ? 1 : 0);
  bool known = true;
  {
    const ClaimedProcCache claimed(*c.local);
    ProcEntry* e = claimed.get() ? &claimed.get()->entry(ctx_.ra, c.exact) : nullptr;
    if (e && e->key == key) { // (only frames with an FDE, in known modules, are kept)
      ctx_.has_fde = true;
      ctx_.lsda = e->lsda;
      ctx_.func = e->func;
      ctx_.personality = e->personality;
    } else {
      unw_proc_info_t info;
      ctx_.has_fde = capi::get_proc_info(c, &info) == UNW_ESUCCESS;
      ctx_.lsda = ctx_.has_fde ? info.lsda : 0;
      ctx_.func = ctx_.has_fde ? info.start_ip : 0;
      ctx_.personality = ctx_.has_fde ? info.handler : 0;
      if (e && ctx_.has_fde) *e = ProcEntry{key, ctx_.lsda, ctx_.func, ctx_.personality};
      known = ctx_.has_fde || capi::known_pc(c.local->map, ctx_.ra);
    }
  }
  // A frame interrupted by a signal (after the trampoline's): its pc is the instruction itself.
  ctx_.flags = kExtendedContextBit | (c.exact ? kSignalFrameBit : 0);
  // libgcc's "CFA" of a context is the CFA of the frame below it, i.e. the frame's own stack
  // pointer (uw_update_context computes the callee's CFA, then moves to the caller): what
  // _Unwind_GetCFA answers and frames are identified by, in libgcc and LLVM's libunwind alike.
  ctx_.cfa = c.regs.get(x86_64::RSP);
  return known;
}

void FrameWalk::record(TrailFrame& out) const {
  out.regs = ctx_.cursor.regs;
  out.exact = ctx_.cursor.exact;
  out.ra = ctx_.ra;
  out.cfa = ctx_.cfa;
  out.lsda = ctx_.lsda;
  out.func = ctx_.func;
  out.personality = ctx_.personality;
  out.flags = ctx_.flags;
  out.has_fde = ctx_.has_fde;
}

void FrameWalk::assume(const TrailFrame& f) {
  capi::Cursor& c = ctx_.cursor;
  c.regs = f.regs;
  c.exact = f.exact;
  c.signal_context = 0; // (as step() leaves it)
  ctx_.ra = f.ra;
  ctx_.cfa = f.cfa;
  ctx_.lsda = f.lsda;
  ctx_.func = f.func;
  ctx_.personality = f.personality;
  ctx_.flags = f.flags;
  ctx_.has_fde = f.has_fde;
}

int FrameWalk::advance() {
  if (ctx_.end) return 0;
  // The last frame's CFA, for the end context, while the cursor is still on it.
  unw_word_t last_cfa = 0;
  const int r = step_on_walk_stack(ctx_.cursor, mem_);
  if (r > 0) return load() ? 1 : kLostCaller;
  if (r < 0) return r;
  // The end context, as libgcc's after the outermost frame: pc 0, and as the stack pointer the
  // last frame's CFA (where its rules leave it; 0 if they cannot). capi::step left the cursor
  // on the last frame.
  ctx_.cfa = capi::get_reg(ctx_.cursor, UNW_X86_64_CFA, &last_cfa) == UNW_ESUCCESS ? last_cfa : 0;
  ctx_.end = true;
  ctx_.has_fde = false;
  ctx_.ra = 0;
  ctx_.lsda = ctx_.func = ctx_.personality = 0;
  ctx_.cursor.regs.set(x86_64::RIP, 0);
  ctx_.cursor.done = true;
  return 0;
}

} // namespace ehelf::eh
