#include "eh_elf/eh_elf_backend.hpp"

#include <cstring>

#include "eh_elf/register_slots.hpp"

namespace ehelf {
namespace {

int deref_through(uint64_t addr, uint64_t* value, void* arg) {
  return static_cast<MemoryReader*>(arg)->read_u64(addr, *value) ? 0 : 1;
}

} // namespace

BackendUnderTest eh_elf_backend(const EhElfObject& object, bool local) {
  BackendUnderTest b;
  const RegisterSet set = register_set_of(object.info());
  b.name = local ? "eh_elf (local)" : "eh_elf (remote)";
  for (unsigned slot = 0; slot < slot_count(set); ++slot)
    b.registers |= 1u << kDwarfRegisterOfSlot[slot];
  b.local = local;
  b.step = [&object, set, local](uint64_t pc, const TableRange&, RegisterState& regs,
                                 MemoryReader& mem, const SyntheticStack& stack,
                                 bool& signal_frame) {
    ehelf_context_t ctx = to_context(regs, set);
    ctx.stack_lo = stack.lo();
    ctx.stack_hi = stack.hi();
    const ehelf_context_t before = ctx;
    const int rc =
        local ? object.unwind_local(pc, &ctx) : object.unwind_remote(pc, &ctx, deref_through, &mem);
    if (rc == EHELF_NEEDS_INTERPRETER) return BackendAnswer::NotApplicable;
    if (rc != EHELF_OK) {
      // The ABI promises an untouched context on failure: report a changed one as a change of
      // the registers (the oracle checks that failed steps change nothing).
      if (std::memcmp(ctx.regs, before.regs, sizeof ctx.regs) != 0 || ctx.flags != before.flags)
        from_context(ctx, set, regs);
      return BackendAnswer::Failed;
    }
    signal_frame = (ctx.flags & EHELF_FLAG_SIGNAL_FRAME) != 0;
    from_context(ctx, set, regs);
    return BackendAnswer::Unwound;
  };
  return b;
}

} // namespace ehelf
