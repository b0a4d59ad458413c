#include "capi/resume.hpp"

#include <ucontext.h>

extern "C" [[noreturn]] void ehelf_capi_jump(const uint64_t* regs);
extern "C" [[noreturn]] void ehelf_capi_sigreturn(void* ucontext);

namespace ehelf::capi {

int resume(Cursor& c) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  if (c.remote || !c.regs.has(x86_64::RIP) || !c.regs.has(x86_64::RSP)) return -UNW_EINVAL;
  if (c.signal_context) {
    auto* uc = reinterpret_cast<ucontext_t*>(c.signal_context);
    for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r)
      if (c.regs.has(r))
        uc->uc_mcontext.gregs[greg_of_dwarf(r)] = static_cast<greg_t>(c.regs.get(r));
    ehelf_capi_sigreturn(uc);
  }
  uint64_t regs[x86_64::kGeneralRegs];
  for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r)
    regs[r] = c.regs.has(r) ? c.regs.get(r) : 0;
  ehelf_capi_jump(regs);
}

} // namespace ehelf::capi
