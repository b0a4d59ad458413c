// __register_frame and its family, as libgcc_s exports them (unwind-dw2-fde.c): frames a program
// registers at run time (JIT code) are unwound by ours, found through the runtime's module map
// (RegisteredFrames), and _Unwind_Find_FDE answers for them, for libgcc_s's own unwinder too
// (glibc's pthread_exit and backtrace() run it).
#include <cstdint>

#include "runtime/registered_frames.hpp"

#define EH_API extern "C" __attribute__((visibility("default")))

namespace {

// libgcc ignores a null `begin` and an .eh_frame that starts with its terminator.
bool empty_section(const void* begin) {
  uint32_t first = 0;
  return !begin || (__builtin_memcpy(&first, begin, 4), first == 0);
}

void add(const void* begin, void* object, void* tbase, void* dbase, bool table) {
  ehelf::RegisteredFrames::Registration r;
  r.begin = begin;
  r.object = object;
  r.text_base = reinterpret_cast<uint64_t>(tbase);
  r.data_base = reinterpret_cast<uint64_t>(dbase);
  r.table = table;
  try {
    (void)ehelf::registered_frames().add(r);
  } catch (...) { // out of memory: the frames stay unknown, as libgcc's malloc failing leaves them
  }
}

} // namespace

// `object` is the caller's storage for libgcc's struct object: ours keeps its own, and gives the
// pointer back on deregistration, as libgcc does.
EH_API void __register_frame_info_bases(const void* begin, void* object, void* tbase, void* dbase) {
  if (!empty_section(begin)) add(begin, object, tbase, dbase, false);
}

EH_API void __register_frame_info(const void* begin, void* object) {
  __register_frame_info_bases(begin, object, nullptr, nullptr);
}

// libgcc allocates the object here and frees it in __deregister_frame; ours needs none.
EH_API void __register_frame(void* begin) {
  __register_frame_info_bases(begin, nullptr, nullptr, nullptr);
}

// `begin`: a null-terminated array of pointers to FDEs.
EH_API void __register_frame_info_table_bases(void* begin, void* object, void* tbase, void* dbase) {
  if (begin) add(begin, object, tbase, dbase, true);
}

EH_API void __register_frame_info_table(void* begin, void* object) {
  __register_frame_info_table_bases(begin, object, nullptr, nullptr);
}

EH_API void __register_frame_table(void* begin) {
  __register_frame_info_table_bases(begin, nullptr, nullptr, nullptr);
}

// The object given when `begin` was registered; null if it was not (libgcc aborts there, on an
// assertion, unless the process is exiting: ours returns null).
EH_API void* __deregister_frame_info_bases(const void* begin) {
  if (!begin) return nullptr;
  try {
    return ehelf::registered_frames().remove(begin).value_or(nullptr);
  } catch (...) {
    return nullptr;
  }
}

EH_API void* __deregister_frame_info(const void* begin) {
  return __deregister_frame_info_bases(begin);
}

EH_API void __deregister_frame(void* begin) {
  (void)__deregister_frame_info_bases(begin);
}
