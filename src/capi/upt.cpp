// libunwind's ptrace helpers (_UPT_*): accessors for a process the caller has ptrace-stopped.
#include <cerrno>
#include <new>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "capi/address_space.hpp"
#include "capi/proc_info.hpp"
#include "ehelf/libunwind-ptrace.h"
#include "runtime/ptrace_process.hpp"

#define UPT_API extern "C" __attribute__((visibility("default")))

namespace {

struct UptHandle {
  static constexpr uint64_t kMagic = 0x5450552d6c656865; // "ehel-UPT"
  uint64_t magic = kMagic;
  pid_t pid = 0;
};

UptHandle* handle(void* arg) {
  auto* h = static_cast<UptHandle*>(arg);
  return h && h->magic == UptHandle::kMagic ? h : nullptr;
}

} // namespace

UPT_API void* _UPT_create(pid_t pid) {
  auto* h = new (std::nothrow) UptHandle;
  if (h) h->pid = pid;
  return h;
}

UPT_API void _UPT_destroy(void* upt) {
  if (UptHandle* h = handle(upt)) {
    h->magic = 0;
    delete h;
  }
}

UPT_API int _UPT_access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* value, int write,
                            void* upt) {
  UptHandle* h = handle(upt);
  if (!h || !value) return -UNW_EINVAL;
  errno = 0;
  if (write) {
    if (::ptrace(PTRACE_POKEDATA, h->pid, reinterpret_cast<void*>(addr),
                 reinterpret_cast<void*>(*value)) != 0)
      return -UNW_EINVAL;
    return UNW_ESUCCESS;
  }
  long word = ::ptrace(PTRACE_PEEKDATA, h->pid, reinterpret_cast<void*>(addr), nullptr);
  if (errno != 0) return -UNW_EINVAL;
  *value = static_cast<unw_word_t>(word);
  return UNW_ESUCCESS;
}

UPT_API int _UPT_access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* value, int write,
                            void* upt) {
  UptHandle* h = handle(upt);
  if (!h || !value) return -UNW_EINVAL;
  if (reg < 0 || reg > UNW_X86_64_RIP) return -UNW_EBADREG;
  void* offset = reinterpret_cast<void*>(ehelf::user_register_offset(static_cast<unsigned>(reg)));
  errno = 0;
  if (write) {
    if (::ptrace(PTRACE_POKEUSER, h->pid, offset, reinterpret_cast<void*>(*value)) != 0)
      return -UNW_EBADREG;
    return UNW_ESUCCESS;
  }
  long word = ::ptrace(PTRACE_PEEKUSER, h->pid, offset, nullptr);
  if (errno != 0) return -UNW_EBADREG;
  *value = static_cast<unw_word_t>(word);
  return UNW_ESUCCESS;
}

UPT_API int _UPT_access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
  return -UNW_EBADREG;
}

UPT_API int _UPT_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int,
                                void* upt) {
  return ehelf::capi::proc_info_by_ip(as, ip, pi, upt);
}

UPT_API void _UPT_put_unwind_info(unw_addr_space_t, unw_proc_info_t*, void*) {}

UPT_API int _UPT_get_dyn_info_list_addr(unw_addr_space_t, unw_word_t*, void*) {
  return -UNW_ENOINFO;
}

UPT_API int _UPT_get_proc_name(unw_addr_space_t as, unw_word_t ip, char* buf, size_t size,
                               unw_word_t* offset, void* upt) {
  return ehelf::capi::proc_name_by_ip(as, ip, buf, size, offset, upt);
}

UPT_API int _UPT_resume(unw_addr_space_t, unw_cursor_t*, void*) {
  return -UNW_EINVAL;
}

__attribute__((visibility("default"))) unw_accessors_t _UPT_accessors = {
    _UPT_find_proc_info, _UPT_put_unwind_info, _UPT_get_dyn_info_list_addr,
    _UPT_access_mem,     _UPT_access_reg,      _UPT_access_fpreg,
    _UPT_resume,         _UPT_get_proc_name};

namespace ehelf::capi {

bool upt_pid(const unw_accessors_t& a, void* arg, pid_t& pid) {
  // Only when the accessors include ours is `arg` expected to be one of our handles.
  bool ours = a.access_mem == _UPT_access_mem || a.access_reg == _UPT_access_reg ||
              a.find_proc_info == _UPT_find_proc_info || a.get_proc_name == _UPT_get_proc_name;
  UptHandle* h = ours ? handle(arg) : nullptr;
  if (!h) return false;
  pid = h->pid;
  return true;
}

} // namespace ehelf::capi
