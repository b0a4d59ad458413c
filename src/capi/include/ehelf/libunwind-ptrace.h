/* ehelf/libunwind-ptrace.h: libunwind's ptrace helpers (_UPT_*), implemented by ehelf.
 *
 * Accessors for unwinding a process the caller has ptrace-stopped:
 *
 *   void* upt = _UPT_create(pid);
 *   unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
 *   unw_init_remote(&cursor, as, upt);  ...  _UPT_destroy(upt);
 *
 * With ehelf the handle also tells unw_init_remote the process id, from which it reads the
 * module list (/proc/PID/maps). The helpers live in libehelf-unwind itself.
 */
#ifndef EHELF_LIBUNWIND_PTRACE_H
#define EHELF_LIBUNWIND_PTRACE_H

#ifndef libunwind_ptrace_h
#define libunwind_ptrace_h
#endif

#include "libunwind.h"

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

void* _UPT_create(pid_t pid);
void _UPT_destroy(void* upt);

int _UPT_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi,
                        int need_unwind_info, void* upt);
void _UPT_put_unwind_info(unw_addr_space_t as, unw_proc_info_t* pi, void* upt);
int _UPT_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t* addr, void* upt);
int _UPT_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t* value, int write,
                    void* upt);
int _UPT_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t* value, int write,
                    void* upt);
int _UPT_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t* value, int write,
                      void* upt);
int _UPT_get_proc_name(unw_addr_space_t as, unw_word_t ip, char* buf, size_t size,
                       unw_word_t* offset, void* upt);
int _UPT_resume(unw_addr_space_t as, unw_cursor_t* cursor, void* upt);

extern unw_accessors_t _UPT_accessors;

#ifdef __cplusplus
}
#endif

#endif /* EHELF_LIBUNWIND_PTRACE_H */
