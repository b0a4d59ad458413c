#include <dlfcn.h>
#include <unwind.h>

#include "eh/libgcc.hpp"

#include <atomic>
#include <mutex>

namespace ehelf::eh::libgcc {

namespace {

template <typename Fn> void look_up(void* handle, Fn& fn, const char* name, const char* version) {
  fn = reinterpret_cast<Fn>(::dlvsym(handle, name, version));
}

Functions resolve() {
  Functions f;
  // RTLD_NOLOAD: only a libgcc_s already there (a libgcc context exists only then).
  void* h = ::dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return f;
  look_up(h, f.get_gr, "_Unwind_GetGR", "GCC_3.0");
  look_up(h, f.set_gr, "_Unwind_SetGR", "GCC_3.0");
  look_up(h, f.get_ip, "_Unwind_GetIP", "GCC_3.0");
  look_up(h, f.get_ip_info, "_Unwind_GetIPInfo", "GCC_4.2.0");
  look_up(h, f.set_ip, "_Unwind_SetIP", "GCC_3.0");
  look_up(h, f.get_cfa, "_Unwind_GetCFA", "GCC_3.3");
  look_up(h, f.get_lsda, "_Unwind_GetLanguageSpecificData", "GCC_3.0");
  look_up(h, f.get_region_start, "_Unwind_GetRegionStart", "GCC_3.0");
  look_up(h, f.get_data_rel_base, "_Unwind_GetDataRelBase", "GCC_3.0");
  look_up(h, f.get_text_rel_base, "_Unwind_GetTextRelBase", "GCC_3.0");
  look_up(h, f.find_fde, "_Unwind_Find_FDE", "GCC_3.0");
  look_up(h, f.raise_exception, "_Unwind_RaiseException", "GCC_3.0");
  look_up(h, f.resume, "_Unwind_Resume", "GCC_3.0");
  look_up(h, f.forced_unwind, "_Unwind_ForcedUnwind", "GCC_3.0");
  ::dlclose(h); // the reference RTLD_NOLOAD took; libgcc_s stays loaded by its other users
  return f;
}

} // namespace

// Resolved when first needed and libgcc_s is loaded (a C program's libgcc_s comes with glibc's
// first pthread_exit or backtrace(), after our load): not cached while it is not there.
const Functions& functions() {
  static std::atomic<bool> ready{false};
  static Functions found;
  static std::mutex lock;
  static const Functions none;
  if (ready.load(std::memory_order_acquire)) return found;
  std::lock_guard<std::mutex> hold(lock);
  if (ready.load(std::memory_order_relaxed)) return found;
  Functions f = resolve();
  if (!f.get_cfa) return none;
  found = f;
  ready.store(true, std::memory_order_release);
  return found;
}

namespace {
// At load, when libgcc_s is there already (C++ programs): no dlopen later, on an unwind in a
// signal handler.
__attribute__((constructor)) void resolve_at_load() {
  (void)functions();
}
} // namespace

} // namespace ehelf::eh::libgcc
