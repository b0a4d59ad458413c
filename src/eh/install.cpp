#include "eh/install.hpp"

#include <cstdlib>

#include "capi/resume.hpp"
#include "eh/counters.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace ehelf::eh {

void install(_Unwind_Context& ctx) {
  count(g_counters.landings);
#if defined(__SANITIZE_ADDRESS__)
  // The frames left behind keep their redzones' poison; AddressSanitizer would report the
  // landing frame's next calls that reuse that stack. As its own __cxa_throw interceptor does.
  __asan_handle_no_return();
#endif
  // A handler in the frame a signal interrupted (-fnon-call-exceptions) is entered as any
  // other, by a jump with the registers the cursor read from the signal context, not by
  // rt_sigreturn (capi::resume's way for unw_resume): as libgcc, the signal mask stays as the
  // signal handler had it.
  ctx.cursor.signal_context = 0;
  (void)capi::resume(ctx.cursor);
  std::abort(); // a local cursor with rip and rsp always resumes
}

} // namespace ehelf::eh
