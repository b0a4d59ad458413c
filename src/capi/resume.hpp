// unw_resume for local cursors: the cursor's registers installed and its frame run on.
#pragma once

#include "capi/cursor.hpp"

namespace ehelf::capi {

// Does not return when it succeeds. A frame whose registers a step read from a signal context
// (the interrupted frame, after the trampoline's) resumes through rt_sigreturn on that context,
// with the cursor's registers written into it (the kernel restores the floating-point state and
// the signal mask too, as libunwind does); any other frame by loading the registers and jumping
// to its pc (libunwind's setcontext: the signal mask and floating-point state stay as they
// are). Registers the cursor does not know (a caller's scratch registers) are 0 in the
// second case. Remote cursors: -UNW_EINVAL.
int resume(Cursor& c);

} // namespace ehelf::capi
