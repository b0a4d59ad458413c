// What personality routines and trace functions read and set in a context. A context of
// libgcc's (see context.hpp: libgcc's unwinder calls the personality routines, which call
// these through their PLT, bound to us) goes to libgcc's own function.
#include <cstdlib>
#include <unwind.h>

#include "eh/context.hpp"
#include "eh/counters.hpp"
#include "eh/libgcc.hpp"

#define EH_API extern "C" __attribute__((visibility("default")))

namespace eh = ehelf::eh;
namespace libgcc = ehelf::eh::libgcc;

namespace {

// libgcc's function `fn` for a context that is not ours; aborts if there is none (a context
// neither ours nor libgcc's), as libgcc aborts on what it cannot serve.
template <typename Fn> Fn foreign(Fn libgcc::Functions::*fn) {
  eh::count(eh::g_counters.foreign);
  Fn f = libgcc::functions().*fn;
  if (!f) std::abort();
  return f;
}

} // namespace

EH_API _Unwind_Word _Unwind_GetGR(_Unwind_Context* ctx, int index) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_gr)(ctx, index);
  unw_word_t value = 0;
  if (ehelf::capi::get_reg(ctx->cursor, index, &value) != UNW_ESUCCESS) return 0;
  return value;
}

EH_API void _Unwind_SetGR(_Unwind_Context* ctx, int index, _Unwind_Word value) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::set_gr)(ctx, index, value);
  // rax and rdx (__builtin_eh_return_data_regno 0 and 1) from the personality routines.
  (void)ehelf::capi::set_reg(ctx->cursor, index, value);
}

EH_API _Unwind_Ptr _Unwind_GetIP(_Unwind_Context* ctx) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_ip)(ctx);
  return ctx->ra;
}

EH_API _Unwind_Ptr _Unwind_GetIPInfo(_Unwind_Context* ctx, int* ip_before_insn) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_ip_info)(ctx, ip_before_insn);
  // A frame interrupted by a signal: its pc is the next instruction to run, not a return
  // address (the personality looks it up as is, rather than pc - 1).
  *ip_before_insn = (ctx->flags & eh::kSignalFrameBit) ? 1 : 0;
  return ctx->ra;
}

EH_API void _Unwind_SetIP(_Unwind_Context* ctx, _Unwind_Ptr value) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::set_ip)(ctx, value);
  ctx->ra = value;
  (void)ehelf::capi::set_reg(ctx->cursor, UNW_X86_64_RIP, value);
}

EH_API _Unwind_Word _Unwind_GetCFA(_Unwind_Context* ctx) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_cfa)(ctx);
  return ctx->cfa;
}

EH_API void* _Unwind_GetLanguageSpecificData(_Unwind_Context* ctx) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_lsda)(ctx);
  return reinterpret_cast<void*>(ctx->lsda);
}

EH_API _Unwind_Ptr _Unwind_GetRegionStart(_Unwind_Context* ctx) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_region_start)(ctx);
  return ctx->func;
}

// 0 on x86_64, as libgcc answers there (it finds these bases for i386 only).
EH_API _Unwind_Ptr _Unwind_GetDataRelBase(_Unwind_Context* ctx) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_data_rel_base)(ctx);
  return ctx->dbase;
}

EH_API _Unwind_Ptr _Unwind_GetTextRelBase(_Unwind_Context* ctx) {
  if (!eh::is_ours(ctx)) return foreign(&libgcc::Functions::get_text_rel_base)(ctx);
  return ctx->tbase;
}
