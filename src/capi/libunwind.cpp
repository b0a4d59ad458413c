// libunwind's C API: each function is a cast and one call into address_space, cursor,
// proc_info or backtrace (the rules on locking and allocation are described in
// address_space.hpp), and libunwind's names of errors and registers.
//
// Besides the plain unw_* names, every function is exported under libunwind's x86_64 link names
// (libunwind's headers #define unw_step to _ULx86_64_step with UNW_LOCAL_ONLY, _Ux86_64_step
// without), so programs compiled against libunwind's own headers link with libehelf-unwind too:
// unw_context_t, unw_cursor_t and the other types have libunwind's layout.
#include "capi/address_space.hpp"
#include "capi/backtrace.hpp"
#include "capi/cursor.hpp"
#include "capi/proc_info.hpp"
#include "capi/resume.hpp"
#include "capi/walk_stack.hpp"

#define UNW_API extern "C" __attribute__((visibility("default")))

using ehelf::capi::cursor_of;
namespace capi = ehelf::capi;

// Declared extern "C" by the header.
__attribute__((visibility("default"))) unw_addr_space_t unw_local_addr_space =
    &capi::g_local_space_object;

// ---- address spaces ----

UNW_API unw_addr_space_t unw_create_addr_space(unw_accessors_t* accessors, int byteorder) {
  return capi::create_space(accessors, byteorder);
}

UNW_API void unw_destroy_addr_space(unw_addr_space_t as) {
  capi::destroy_space(as);
}

UNW_API unw_accessors_t* unw_get_accessors(unw_addr_space_t as) {
  return capi::accessors_of(as);
}

UNW_API void unw_flush_cache(unw_addr_space_t as, unw_word_t, unw_word_t) {
  capi::flush_cache(as);
}

UNW_API int unw_set_caching_policy(unw_addr_space_t as, unw_caching_policy_t policy) {
  return capi::set_caching_policy(as, policy);
}

UNW_API int ehelf_unw_preload(void) {
  return capi::preload_local();
}

UNW_API int unw_set_cache_size(unw_addr_space_t as, size_t, int) {
  return as ? UNW_ESUCCESS : -UNW_EINVAL; // rule caches have a fixed size
}

// ---- walking ----

// Walks run on the thread's walk stack (walk_stack.hpp): a few hundred bytes of the caller's.
namespace {
struct InitLocal {
  unw_cursor_t* cursor;
  const unw_context_t* context;
  bool exact;
};
int init_local_on_walk_stack(unw_cursor_t* cursor, const unw_context_t* context, bool exact) {
  InitLocal args{cursor, context, exact};
  return capi::on_walk_stack(
      [](void* a) {
        const auto& i = *static_cast<InitLocal*>(a);
        return capi::init_local(i.cursor, i.context, i.exact);
      },
      &args);
}
} // namespace

UNW_API int unw_init_local(unw_cursor_t* cursor, unw_context_t* context) {
  return init_local_on_walk_stack(cursor, context, false);
}

UNW_API int unw_init_local2(unw_cursor_t* cursor, unw_context_t* context, int flags) {
  return init_local_on_walk_stack(cursor, context, (flags & UNW_INIT_SIGNAL_FRAME) != 0);
}

UNW_API int unw_init_remote(unw_cursor_t* cursor, unw_addr_space_t as, void* arg) {
  return capi::init_remote(cursor, as, arg);
}

UNW_API int unw_step(unw_cursor_t* cursor) {
  return capi::on_walk_stack(
      [](void* c) {
        capi::Cursor& cur = *cursor_of(static_cast<unw_cursor_t*>(c));
        capi::check_late_module(cur);
        return capi::step(cur);
      },
      cursor);
}

UNW_API int unw_resume(unw_cursor_t* cursor) {
  return capi::resume(*cursor_of(cursor));
}

// unw_backtrace is in backtrace.S: it passes its caller's registers to this.
extern "C" int ehelf_capi_backtrace(void** buffer, int size, const ehelf::WalkStart* caller) {
  struct Backtrace {
    void** buffer;
    int size;
    const ehelf::WalkStart* caller;
  } args{buffer, size, caller};
  return capi::on_walk_stack(
      [](void* a) {
        const auto& b = *static_cast<Backtrace*>(a);
        return capi::backtrace_from(*b.caller, b.buffer, b.size);
      },
      &args);
}

// ---- the current frame ----

UNW_API int unw_get_reg(unw_cursor_t* cursor, unw_regnum_t reg, unw_word_t* value) {
  return capi::get_reg(*cursor_of(cursor), reg, value);
}

UNW_API int unw_set_reg(unw_cursor_t* cursor, unw_regnum_t reg, unw_word_t value) {
  return capi::set_reg(*cursor_of(cursor), reg, value);
}

UNW_API int unw_get_fpreg(unw_cursor_t*, unw_regnum_t, unw_fpreg_t*) {
  return -UNW_EBADREG;
}

UNW_API int unw_set_fpreg(unw_cursor_t*, unw_regnum_t, unw_fpreg_t) {
  return -UNW_EBADREG;
}

UNW_API int unw_get_save_loc(unw_cursor_t* cursor, int reg, unw_save_loc_t* loc) {
  return capi::get_save_loc(*cursor_of(cursor), reg, loc);
}

UNW_API int unw_is_signal_frame(unw_cursor_t* cursor) {
  return capi::is_signal_frame(*cursor_of(cursor));
}

UNW_API int unw_is_fpreg(int) {
  return 0;
}

UNW_API int unw_get_proc_info(unw_cursor_t* cursor, unw_proc_info_t* info) {
  return capi::get_proc_info(*cursor_of(cursor), info);
}

UNW_API int unw_get_proc_info_by_ip(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* info,
                                    void* arg) {
  return capi::proc_info_by_ip(as, ip, info, arg);
}

UNW_API int unw_get_proc_name(unw_cursor_t* cursor, char* buf, size_t size, unw_word_t* offset) {
  return capi::get_proc_name(*cursor_of(cursor), buf, size, offset);
}

// ---- names ----

UNW_API const char* unw_regname(unw_regnum_t reg) {
  static const char* const names[] = {"RAX", "RDX", "RCX", "RBX", "RSI", "RDI",
                                      "RBP", "RSP", "R8",  "R9",  "R10", "R11",
                                      "R12", "R13", "R14", "R15", "RIP", "CFA"};
  if (reg < 0 || reg > UNW_X86_64_CFA) return "???";
  return names[reg];
}

UNW_API const char* unw_strerror(int error) {
  switch (error < 0 ? -error : error) {
  case UNW_ESUCCESS:
    return "no error";
  case UNW_EUNSPEC:
    return "unspecified (general) error";
  case UNW_ENOMEM:
    return "out of memory";
  case UNW_EBADREG:
    return "bad register number";
  case UNW_EREADONLYREG:
    return "attempt to write read-only register";
  case UNW_ESTOPUNWIND:
    return "stop unwinding";
  case UNW_EINVALIDIP:
    return "invalid IP";
  case UNW_EBADFRAME:
    return "bad frame";
  case UNW_EINVAL:
    return "unsupported operation or bad value";
  case UNW_EBADVERSION:
    return "unwind info has unsupported version";
  case UNW_ENOINFO:
    return "no unwind info found";
  default:
    return "invalid error code";
  }
}

// ---- libunwind's link names ----

// UNW_OBJ names: _ULx86_64_ (UNW_LOCAL_ONLY) and _Ux86_64_.
#define EHELF_UNW_OBJ_ALIASES(name)                                                                \
  UNW_API __attribute__((alias("unw_" #name))) decltype(unw_##name) _ULx86_64_##name;              \
  UNW_API __attribute__((alias("unw_" #name))) decltype(unw_##name) _Ux86_64_##name;
// UNW_ARCH_OBJ names: _Ux86_64_ only.
#define EHELF_UNW_ARCH_ALIAS(name)                                                                 \
  UNW_API __attribute__((alias("unw_" #name))) decltype(unw_##name) _Ux86_64_##name;

extern "C" {
extern __attribute__((visibility("default"), alias("unw_local_addr_space")))
unw_addr_space_t _ULx86_64_local_addr_space;
extern __attribute__((visibility("default"), alias("unw_local_addr_space")))
unw_addr_space_t _Ux86_64_local_addr_space;
}
EHELF_UNW_OBJ_ALIASES(create_addr_space)
EHELF_UNW_OBJ_ALIASES(destroy_addr_space)
EHELF_UNW_OBJ_ALIASES(set_caching_policy)
EHELF_UNW_OBJ_ALIASES(set_cache_size)
EHELF_UNW_OBJ_ALIASES(init_local)
EHELF_UNW_OBJ_ALIASES(init_local2)
EHELF_UNW_OBJ_ALIASES(init_remote)
EHELF_UNW_OBJ_ALIASES(step)
EHELF_UNW_OBJ_ALIASES(resume)
EHELF_UNW_OBJ_ALIASES(get_reg)
EHELF_UNW_OBJ_ALIASES(set_reg)
EHELF_UNW_OBJ_ALIASES(get_fpreg)
EHELF_UNW_OBJ_ALIASES(set_fpreg)
EHELF_UNW_OBJ_ALIASES(get_save_loc)
EHELF_UNW_OBJ_ALIASES(is_signal_frame)
EHELF_UNW_OBJ_ALIASES(get_proc_info)
EHELF_UNW_OBJ_ALIASES(get_proc_info_by_ip)
EHELF_UNW_OBJ_ALIASES(get_proc_name)
EHELF_UNW_ARCH_ALIAS(get_accessors)
EHELF_UNW_ARCH_ALIAS(flush_cache)
EHELF_UNW_ARCH_ALIAS(is_fpreg)
EHELF_UNW_ARCH_ALIAS(regname)
EHELF_UNW_ARCH_ALIAS(strerror)
// unw_getcontext's aliases are in getcontext.S.
