#include "eh/install.hpp"

#include <cstdlib>

#include "capi/resume.hpp"
#include "eh/counters.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace ehelf::eh {

void install(_Unwind_Context& ctx) {
  count(g_counters.landings);
#if defined(__SANITIZE_ADDRESS__)
  // The frames left behind keep their redzones' poison; AddressSanitizer would report the
  // landing frame's next calls that reuse that stack. As its own __cxa_throw interceptor does.
  __asan_handle_no_return();
#endif
  (void)capi::resume(ctx.cursor);
  std::abort(); // a local cursor with rip and rsp always resumes
}

} // namespace ehelf::eh
