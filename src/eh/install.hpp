// Entering a landing pad or handler: the frame's registers as the unwound frames saved them,
// with the personality's rax, rdx and rip (_Unwind_SetGR, _Unwind_SetIP), installed by
// capi::resume (resume.S: every general register loaded, rsp switched, a jump to rip).
#pragma once

#include "eh/context.hpp"

namespace ehelf::eh {

// Does not return; aborts if the registers cannot be installed (no rip or rsp).
[[noreturn]] void install(_Unwind_Context& ctx);

} // namespace ehelf::eh
