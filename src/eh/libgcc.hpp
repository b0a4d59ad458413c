// libgcc_s's own functions, for what is libgcc's: its contexts (libgcc's unwinder, run by glibc
// through dlsym for pthread_exit, pthread_cancel and backtrace(), calls the personality routines
// with them, and those call us), the frames it knows that we do not (__register_frame'd), and
// the raises and resumes our walk cannot finish (phases.cpp).
#pragma once

#include <cstdint>
#include <unwind.h>

namespace ehelf::eh::libgcc {

// The functions, looked up in the libgcc_s.so.1 already loaded (dlopen RTLD_NOLOAD, dlvsym with
// libgcc's version), once; null when libgcc_s is not loaded (then no libgcc context exists).
struct Functions {
  uint64_t (*get_gr)(_Unwind_Context*, int) = nullptr;
  void (*set_gr)(_Unwind_Context*, int, uint64_t) = nullptr;
  uint64_t (*get_ip)(_Unwind_Context*) = nullptr;
  uint64_t (*get_ip_info)(_Unwind_Context*, int*) = nullptr;
  void (*set_ip)(_Unwind_Context*, uint64_t) = nullptr;
  uint64_t (*get_cfa)(_Unwind_Context*) = nullptr;
  void* (*get_lsda)(_Unwind_Context*) = nullptr;
  uint64_t (*get_region_start)(_Unwind_Context*) = nullptr;
  uint64_t (*get_data_rel_base)(_Unwind_Context*) = nullptr;
  uint64_t (*get_text_rel_base)(_Unwind_Context*) = nullptr;
  const void* (*find_fde)(void*, void*) = nullptr;
  _Unwind_Reason_Code (*raise_exception)(_Unwind_Exception*) = nullptr;
  void (*resume)(_Unwind_Exception*) = nullptr;
  _Unwind_Reason_Code (*forced_unwind)(_Unwind_Exception*, _Unwind_Stop_Fn, void*) = nullptr;
};

// Null members when libgcc_s is not loaded.
const Functions& functions();

} // namespace ehelf::eh::libgcc
