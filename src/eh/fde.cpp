// _Unwind_Find_FDE and _Unwind_FindEnclosingFunction: the FDE of a pc, from the runtime's module
// map (the loaded .eh_frame_hdr's search table). libgcc's own unwinder calls _Unwind_Find_FDE
// through its PLT, so with us loaded first it reads the FDEs we find: they are the loaded
// .eh_frame's own bytes, with libgcc's bases.
#include <unwind.h>

#include "capi/address_space.hpp"
#include "capi/proc_info.hpp"
#include "eh/libgcc.hpp"

#define EH_API extern "C" __attribute__((visibility("default")))

namespace {

// libgcc's struct dwarf_eh_bases (unwind-dw2-fde.h).
struct DwarfEhBases {
  void* tbase;
  void* dbase;
  void* func;
};

// The loaded FDE holding `pc` in a module the runtime knows (null if none), and its function's
// start.
const void* our_fde(uint64_t pc, uint64_t& func) {
  ehelf::capi::LocalSpace* s = ehelf::capi::local_space();
  if (!s) return nullptr;
  ehelf::capi::Where w;
  if (!ehelf::capi::locate_in(s->map, pc, nullptr, w) || !w.data) return nullptr;
  const uint64_t eh_frame = w.data->loaded.eh_frame;
  if (!eh_frame) return nullptr; // rows not from the loaded .eh_frame (no copy of the FDE)
  try {
    const std::optional<ehelf::FunctionInfo> fn = w.data->function_at(pc - w.module->bias);
    if (!fn || fn->from_debug_frame) return nullptr;
    func = fn->pc_begin + w.module->bias;
    return reinterpret_cast<const void*>(eh_frame + fn->fde_offset);
  } catch (...) {
    return nullptr;
  }
}

} // namespace

// The FDE of `pc` with its bases (tbase and dbase 0 on x86_64, as libgcc's). Frames we do not
// know (registered with libgcc's __register_frame: JIT code) are asked of libgcc.
EH_API const void* _Unwind_Find_FDE(void* pc, DwarfEhBases* bases) {
  DwarfEhBases unused{};
  if (!bases) bases = &unused; // libgcc's would write through a null; a caller's slip, not a crash
  uint64_t func = 0;
  if (const void* fde = our_fde(reinterpret_cast<uint64_t>(pc), func)) {
    bases->tbase = nullptr;
    bases->dbase = nullptr;
    bases->func = reinterpret_cast<void*>(func);
    return fde;
  }
  if (auto find = ehelf::eh::libgcc::functions().find_fde) return find(pc, bases);
  return nullptr;
}

EH_API void* _Unwind_FindEnclosingFunction(void* pc) {
  DwarfEhBases bases{};
  const void* fde = _Unwind_Find_FDE(static_cast<char*>(pc) - 1, &bases);
  return fde ? bases.func : nullptr;
}
