#include "capi/cursor.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <ucontext.h>

#include "capi/proc_info.hpp"
#include "capi/thread_caches.hpp"

namespace ehelf::capi {

// As LLVM libunwind's check_fit: the C++ cursor must fit the C one.
static_assert(sizeof(Cursor) <= sizeof(unw_cursor_t), "unw_cursor_t is too small for Cursor");
static_assert(alignof(Cursor) <= alignof(unw_cursor_t), "unw_cursor_t is under-aligned");
static_assert(std::is_trivially_copyable_v<Cursor>, "cursors are copied with memcpy");

Cursor* cursor_of(unw_cursor_t* cursor) {
  return std::launder(reinterpret_cast<Cursor*>(cursor));
}

// unw_context_t is a ucontext_t: getcontext.S stores the registers where greg_of_dwarf says.
static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 40, "getcontext.S assumes gregs at 40");
static_assert(REG_R8 == 0 && REG_RDI == 8 && REG_RBX == 11 && REG_RAX == 13 && REG_RSP == 15 &&
                  REG_RIP == 16,
              "getcontext.S assumes glibc's gregs order");

namespace {

int error_of(StopReason r) {
  switch (r) {
  case StopReason::None:
    return UNW_ESUCCESS;
  case StopReason::EndOfStack:
  case StopReason::NoModule:
    return UNW_ESUCCESS; // handled by the caller: the end
  case StopReason::NoTable:
    return UNW_ENOINFO;
  case StopReason::BadRead:
  case StopReason::CfaNotGrowing:
    return UNW_EBADFRAME;
  case StopReason::MissingRegister:
    return UNW_EBADREG;
  case StopReason::DepthLimit:
  case StopReason::RuleFailed:
    return UNW_EUNSPEC;
  }
  return UNW_EUNSPEC;
}

// One step of `c` into `regs` (and `saved`, if given), without moving the cursor. Cursors step
// with every register's rule evaluated, so that unw_get_reg gives callers' callee-saved
// registers (r12-r15 too).
// Local steps remember the rows they find in the thread's own caches (taken when free: a signal
// handler that interrupted a walk of its thread steps without them).
// `exact`: regs.rip is an interrupted instruction (the cursor's own frame: c.exact).
StopReason step_copy(Cursor& c, RegisterState& regs, bool exact, FrameInfo& info,
                     SaveSlots* saved) {
  if (!c.remote) {
    SelfMemory mem = local_memory(c);
    const ClaimedCaches caches(*c.local);
    return c.local->walker.step_every_register(regs, mem, exact, info, saved,
                                               caches.get() ? &caches.get()->rows : nullptr);
  }
  AccessorMemory mem(c.as, c.arg);
  Where w;
  locate(c, w); // loads the module's data through the accessors if needed
  return c.as->walker->step_every_register(regs, mem, exact, info, saved);
}

// Whether a caller whose pc is in no known module is a frame: code outside every module (JIT
// code) from which following rbp leads on, as the next step would. Otherwise (not code, or
// code that cannot be unwound) the walk ends there, as at the outermost frame.
bool frame_outside_modules(Cursor& c, const RegisterState& caller, bool exact) {
  RegisterState next = caller;
  FrameInfo info;
  return step_copy(c, next, exact, info, nullptr) == StopReason::None;
}

// The registers whose save locations unw_get_save_loc gives, as libunwind does on x86_64: the
// callee-saved ones, rsp and rip. A scratch register is not preserved across calls, so a
// caller's value of one has no save slot to speak of (libunwind answers UNW_SLT_NONE for them
// in every frame, the first one included).
constexpr uint32_t kSaveLocRegisters = 1u << x86_64::RBX | 1u << x86_64::RBP | 1u << x86_64::RSP |
                                       1u << x86_64::R12 | 1u << x86_64::R13 | 1u << x86_64::R14 |
                                       1u << x86_64::R15 | 1u << x86_64::RIP;

} // namespace

SelfMemory local_memory(const Cursor& c) {
  SelfMemory mem;
  for (uint32_t i = 0; i < c.range_count; ++i)
    mem.stacks.add(c.ranges[i]);
  return mem;
}

int init_local(unw_cursor_t* cursor, const unw_context_t* context, bool exact) {
  if (!cursor || !context) return -UNW_EINVAL;
  LocalSpace* s = local_space();
  if (!s) return -UNW_ENOMEM;
  LocalMemory mem;
  local_ranges(mem);
  Cursor* c = new (cursor) Cursor{};
  start_local(*c, *s, *context, mem);
  // A pc at a function's first instruction is an interrupted one (a signal handler's ucontext
  // faulting there, a makecontext context), never the return address unw_getcontext leaves:
  // a call that is its function's last instruction does not return. Looked up at pc - 1, as a
  // return address is, it would take the previous function's row and skip the caller.
  const auto pc = static_cast<uint64_t>(context->uc_mcontext.gregs[REG_RIP]);
  c->exact = exact || is_function_entry(s->map, pc);
  return UNW_ESUCCESS;
}

void start_local(Cursor& c, LocalSpace& s, const unw_context_t& context,
                 const LocalMemory& ranges) {
  // Field by field rather than `c = Cursor{}` (a 464-byte cursor cleared, then written again: a
  // tenth of an _Unwind_Resume's time). A field added to Cursor changes its size: set it here.
  static_assert(sizeof(Cursor) == 464, "every Cursor field is set below");
  c.magic = Cursor::kMagic;
  c.remote = c.exact = c.done = c.last_entry_signal = false;
  c.signal_context = 0;
  c.as = &g_local_space_object;
  c.arg = nullptr;
  c.local = &s;
  // The first frame's registers are in the context, where libunwind's save locations point too
  // (the context must outlive the cursor: unw_init_local(3)).
  for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r) {
    c.regs.value[r] = static_cast<uint64_t>(context.uc_mcontext.gregs[greg_of_dwarf(r)]);
    c.saved.address[r] = reinterpret_cast<uint64_t>(&context.uc_mcontext.gregs[greg_of_dwarf(r)]);
  }
  c.regs.valid = c.saved.valid = (1u << x86_64::kGeneralRegs) - 1;
  c.range_count = 0;
  for (const DirectRange& r : ranges.ranges())
    c.ranges[c.range_count++] = AddressRange{r.begin, r.end};
}

int init_remote(unw_cursor_t* cursor, unw_addr_space* as, void* arg) {
  if (!cursor || !as) return -UNW_EINVAL;
  if (as->local) return init_local(cursor, static_cast<const unw_context_t*>(arg), false);
  if (!as->accessors.access_reg || !as->accessors.access_mem) return -UNW_EINVAL;
  try {
    RegisterState regs;
    for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r) {
      unw_word_t v = 0;
      if (as->accessors.access_reg(as, static_cast<unw_regnum_t>(r), &v, 0, arg) == 0)
        regs.set(r, v);
    }
    if (!regs.has(x86_64::RIP) || !regs.has(x86_64::RSP)) return -UNW_EBADREG;
    pid_t pid = find_pid(as, arg, regs);
    if (pid <= 0 || !ensure_remote_map(as, pid)) return -UNW_EINVAL;
    Cursor* c = new (cursor) Cursor{};
    c->remote = true;
    c->exact = true; // a stopped thread's pc is the instruction it will run next
    c->as = as;
    c->arg = arg;
    c->regs = regs;
    return UNW_ESUCCESS;
  } catch (...) {
    return -UNW_ENOMEM;
  }
}

void check_late_module(const Cursor& c) {
  if (c.magic != Cursor::kMagic || c.remote || !c.local || !c.regs.has(x86_64::RIP) ||
      c.local->late.none_found())
    return;
  const uint64_t pc = c.regs.get(x86_64::RIP);
  (void)c.local->late.check_slot_at(c.exact ? pc : pc - 1);
}

int step(Cursor& c) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  if (c.done) return 0;
  RegisterState regs = c.regs;
  SaveSlots saved = c.saved;
  FrameInfo info;
  StopReason r;
  bool end = false;
  try {
    r = step_copy(c, regs, c.exact, info, &saved);
    const ModuleMap& map = c.remote ? *c.as->map : c.local->map;
    end = r == StopReason::EndOfStack || r == StopReason::NoModule ||
          (r == StopReason::None && !known_pc(map, regs.get(x86_64::RIP)) &&
           !frame_outside_modules(c, regs, info.signal_frame));
  } catch (...) { // only error paths allocate (their messages)
    return -UNW_EUNSPEC;
  }
  if (end) {
    c.done = true;
    return 0;
  }
  if (r != StopReason::None) return -error_of(r);
  c.regs = regs;
  c.saved = saved;
  c.exact = info.signal_frame; // after a signal frame the pc is the interrupted instruction
  c.last_entry_signal = info.signal_frame;
  c.signal_context = info.signal_frame && saved.has(x86_64::RIP)
                         ? saved.address[x86_64::RIP] - offsetof(ucontext_t, uc_mcontext.gregs) -
                               REG_RIP * sizeof(greg_t)
                         : 0;
  return 1;
}

int get_reg(Cursor& c, int reg, unw_word_t* value) {
  if (c.magic != Cursor::kMagic || !value) return -UNW_EINVAL;
  if (reg >= 0 && reg < int(x86_64::kGeneralRegs)) {
    if (!c.regs.has(unsigned(reg))) return -UNW_EBADREG;
    *value = c.regs.get(unsigned(reg));
    return UNW_ESUCCESS;
  }
  if (reg == UNW_X86_64_CFA) { // the caller's stack pointer
    RegisterState regs = c.regs;
    FrameInfo info;
    StopReason r;
    try {
      r = step_copy(c, regs, c.exact, info, nullptr);
    } catch (...) {
      return -UNW_EUNSPEC;
    }
    if ((r != StopReason::None && r != StopReason::EndOfStack) || !regs.has(x86_64::RSP))
      return -UNW_EBADFRAME;
    *value = regs.get(x86_64::RSP);
    return UNW_ESUCCESS;
  }
  return -UNW_EBADREG;
}

int set_reg(Cursor& c, int reg, unw_word_t value) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  if (reg == UNW_X86_64_RSP || reg == UNW_X86_64_CFA) return -UNW_EREADONLYREG;
  if (reg < 0 || reg >= int(x86_64::kGeneralRegs)) return -UNW_EBADREG;
  c.regs.set(unsigned(reg), value);
  c.saved.clear(unsigned(reg)); // the value is the cursor's own now, in no save slot
  if (reg == UNW_X86_64_RIP) c.done = false;
  return UNW_ESUCCESS;
}

int get_save_loc(Cursor& c, int reg, unw_save_loc_t* loc) {
  if (c.magic != Cursor::kMagic || !loc) return -UNW_EINVAL;
  if (reg < 0 || reg > UNW_X86_64_CFA) return -UNW_EBADREG;
  std::memset(loc, 0, sizeof *loc);
  // Where the frame's value was read from: the context the walk started from, a save slot of
  // a callee's frame (CFA + offset, or a signal context through the trampoline's expressions),
  // kept through frames that did not save the register again. A caller's rsp is the CFA, a
  // value held nowhere: UNW_SLT_NONE, where libunwind 1.6 answers an out-of-date address (the
  // first frame's, which does not hold the caller's rsp; tests/capi/signal_frames.c).
  if (reg < int(x86_64::kGeneralRegs) && (kSaveLocRegisters >> reg) & 1u &&
      c.saved.has(unsigned(reg))) {
    loc->type = UNW_SLT_MEMORY;
    loc->u.addr = c.saved.address[unsigned(reg)];
  } else {
    loc->type = UNW_SLT_NONE;
  }
  return UNW_ESUCCESS;
}

int is_signal_frame(const Cursor& c) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  return c.last_entry_signal ? 1 : 0;
}

} // namespace ehelf::capi
