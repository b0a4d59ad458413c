// The walks over libunwind's API, shared by the libraries that implement it (libunwind-dev in
// unwind_bench, LLVM's libunwind in unwind_bench_llvm, ehelf's libehelf-unwind in
// unwind_bench_capi): include it after the library's own <libunwind.h>.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bench {

// Walks from the caller, one unw_step per frame, writing each frame's ip.
__attribute__((noinline)) inline size_t unw_step_loop(uint64_t* pcs, size_t max, bool) {
  unw_context_t uc;
  unw_cursor_t cursor;
  if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) < 0) return 0;
  size_t n = 0;
  do {
    unw_word_t ip = 0;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    pcs[n++] = ip;
  } while (n < max && unw_step(&cursor) > 0);
  asm volatile("" ::: "memory");
  return n;
}

#ifndef BENCH_LLVM // (LLVM's libunwind has no unw_backtrace)
// unw_backtrace from the caller into `pcs`.
__attribute__((noinline)) inline size_t unw_backtrace_once(uint64_t* pcs, size_t max, bool) {
  int n = unw_backtrace(reinterpret_cast<void**>(pcs), int(max));
  asm volatile("" ::: "memory");
  return n < 0 ? 0 : size_t(n);
}

inline void unw_flush_local() { unw_flush_cache(unw_local_addr_space, 0, 0); }
#endif

} // namespace bench
