#include "capi/cursor.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <ucontext.h>

#include "capi/proc_info.hpp"

namespace ehelf::capi {

// As LLVM libunwind's check_fit: the C++ cursor must fit the C one.
static_assert(sizeof(Cursor) <= sizeof(unw_cursor_t), "unw_cursor_t is too small for Cursor");
static_assert(alignof(Cursor) <= alignof(unw_cursor_t), "unw_cursor_t is under-aligned");
static_assert(std::is_trivially_copyable_v<Cursor>, "cursors are copied with memcpy");

Cursor* cursor_of(unw_cursor_t* cursor) {
  return std::launder(reinterpret_cast<Cursor*>(cursor));
}

namespace {

// unw_context_t is a ucontext_t: gregs slot of each DWARF register. getcontext.S stores them at
// these offsets.
constexpr int kGregOfDwarf[x86_64::kGeneralRegs] = {
    REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
    REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 40, "getcontext.S assumes gregs at 40");
static_assert(REG_R8 == 0 && REG_RDI == 8 && REG_RBX == 11 && REG_RAX == 13 && REG_RSP == 15 &&
                  REG_RIP == 16,
              "getcontext.S assumes glibc's gregs order");

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

// One step of `c` into `regs`, without moving the cursor. Cursors step with every register's
// rule evaluated, so that unw_get_reg gives callers' callee-saved registers (r12-r15 too).
StopReason step_copy(Cursor& c, RegisterState& regs, FrameInfo& info) {
  if (!c.remote) {
    SelfMemory mem = local_memory(c);
    return c.local->walker.step_every_register(regs, mem, c.exact, info);
  }
  AccessorMemory mem(c.as, c.arg);
  Where w;
  locate(c, w); // loads the module's data through the accessors if needed
  return c.as->walker->step_every_register(regs, mem, c.exact, info);
}

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
  c->as = &g_local_space_object;
  c->local = s;
  c->exact = exact;
  for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r)
    c->regs.set(r, static_cast<uint64_t>(context->uc_mcontext.gregs[kGregOfDwarf[r]]));
  for (const DirectRange& r : mem.ranges())
    c->ranges[c->range_count++] = AddressRange{r.begin, r.end};
  return UNW_ESUCCESS;
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

int step(Cursor& c) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  if (c.done) return 0;
  RegisterState regs = c.regs;
  FrameInfo info;
  StopReason r;
  try {
    r = step_copy(c, regs, info);
  } catch (...) { // only error paths allocate (their messages)
    return -UNW_EUNSPEC;
  }
  const ModuleMap& map = c.remote ? *c.as->map : c.local->map;
  if (r == StopReason::EndOfStack || r == StopReason::NoModule ||
      (r == StopReason::None && !known_pc(map, regs.get(x86_64::RIP)))) {
    c.done = true; // a caller in no known module is treated as the end of the stack
    return 0;
  }
  if (r != StopReason::None) return -error_of(r);
  c.regs = regs;
  c.exact = info.signal_frame; // after a signal frame the pc is the interrupted instruction
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
      r = step_copy(c, regs, info);
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
  if (reg == UNW_X86_64_RIP) c.done = false;
  return UNW_ESUCCESS;
}

int get_save_loc(Cursor& c, int reg, unw_save_loc_t* loc) {
  if (c.magic != Cursor::kMagic || !loc) return -UNW_EINVAL;
  if (reg < 0 || reg > UNW_X86_64_CFA) return -UNW_EBADREG;
  std::memset(loc, 0, sizeof *loc);
  loc->type = UNW_SLT_NONE; // ehelf tracks values, not where they were saved
  return UNW_ESUCCESS;
}

} // namespace ehelf::capi
