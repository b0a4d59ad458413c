// struct _Unwind_Context as libehelf-eh makes it: a capi::Cursor on one frame, what the frame's
// FDE says (lsda, personality, start), and a prefix laid out as libgcc's own context.
//
// Why the prefix: libgcc_s stays loaded beside us and glibc calls it directly, bypassing
// symbol interposition (pthread_exit and pthread_cancel run libgcc's _Unwind_ForcedUnwind
// through dlsym, backtrace() runs libgcc's _Unwind_Backtrace). So contexts cross in both
// directions: glibc's stop function reads one of ours with libgcc's _Unwind_GetCFA (a load at
// offset 0x90), and libstdc++'s personality, called by libgcc, hands us libgcc's contexts
// through _Unwind_GetLanguageSpecificData & co. Ours keep cfa, ra, lsda, bases and flags
// where libgcc reads them, and tell themselves apart by `version`, which libgcc zeroes and
// never sets ("0 for now" in unwind-dw2.c), while ours holds kOurs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unwind.h>

#include "capi/cursor.hpp"

namespace ehelf::eh {

inline constexpr uint64_t kOurs = 0x6568656c665f6568; // "eh_flehe"
// libgcc's flag bits (unwind-dw2.c): a signal frame, a context with version/args_size/by_value.
inline constexpr uint64_t kSignalFrameBit = uint64_t(1) << 63;
inline constexpr uint64_t kExtendedContextBit = uint64_t(1) << 62;

} // namespace ehelf::eh

struct _Unwind_Context {
  // ---- libgcc's layout (x86_64: 17 DWARF frame registers + 1) ----
  uint64_t gcc_reg[18] = {}; // libgcc's register slots: unused, left 0 (by_value all 0)
  uint64_t cfa = 0;          // 0x90: the frame's rsp (libgcc's "CFA": see frames.cpp)
  uint64_t ra = 0;           // 0x98: the frame's pc (_Unwind_GetIP)
  uint64_t lsda = 0;         // 0xa0
  uint64_t tbase = 0, dbase = 0, func = 0; // dwarf_eh_bases (tbase, dbase: 0 on x86_64)
  uint64_t flags = ehelf::eh::kExtendedContextBit;
  uint64_t version = ehelf::eh::kOurs; // libgcc's are 0
  uint64_t args_size = 0;
  char by_value[18] = {};
  // ---- ours ----
  uint64_t personality = 0; // the FDE's personality routine (0: none)
  bool has_fde = false;     // the frame's FDE was found
  bool end = false;         // past the outermost frame: pc 0, as libgcc's last context
  ehelf::capi::Cursor cursor;
};

static_assert(offsetof(_Unwind_Context, cfa) == 0x90, "libgcc's _Unwind_GetCFA reads 0x90");
static_assert(offsetof(_Unwind_Context, ra) == 0x98, "libgcc's _Unwind_GetIP reads 0x98");
static_assert(offsetof(_Unwind_Context, lsda) == 0xa0, "libgcc's _Unwind_GetLSDA reads 0xa0");
static_assert(offsetof(_Unwind_Context, func) == 0xb8, "libgcc's GetRegionStart reads 0xb8");
static_assert(offsetof(_Unwind_Context, flags) == 0xc0, "libgcc's flags are at 0xc0");
static_assert(offsetof(_Unwind_Context, version) == 0xc8, "libgcc's version is at 0xc8");

namespace ehelf::eh {

inline bool is_ours(const _Unwind_Context* c) {
  return c->version == kOurs;
}

} // namespace ehelf::eh
