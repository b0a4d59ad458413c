/* ehelf/libunwind.h: libunwind's public C API (x86_64, local and remote), implemented by ehelf.
 *
 * A program written against libunwind compiles unchanged against this header (installed so that
 * `#include <libunwind.h>` finds it: `pkg-config --cflags --libs ehelf-unwind`) and links with
 * libehelf-unwind. Names, types, constants and the layouts of every type a program allocates
 * (unw_context_t, unw_cursor_t, unw_proc_info_t, unw_accessors_t) are those of libunwind on
 * x86_64, so the library also exports libunwind's link names (_ULx86_64_step, _Ux86_64_step, ...)
 * and a program compiled against libunwind's own headers can link with it too.
 *
 * What differs from libunwind (see docs/ or the implementation for details):
 *  - Local unwinding is async-signal-safe from the process's first call on: the library builds
 *    its view of the loaded modules when it is loaded (no table is parsed ahead), and every walk
 *    (unw_init_local, unw_step, unw_backtrace) finds each frame's row through the module's
 *    .eh_frame_hdr, taking no lock and allocating nothing; a library dlopen'd later is found
 *    when a walk first meets it (the loader's list read without its lock); a pc in no module
 *    ends the walk (unw_step returns 0). unw_flush_cache(unw_local_addr_space, 0, 0) re-reads
 *    the module list at once (not in signal handlers).
 *  - ehelf_unw_preload() (an ehelf extension, below) builds compact tables of every loaded
 *    module ahead, outside signal handlers, so that the walks' rule-cache misses cost tens of
 *    instructions instead of a search of .eh_frame. Never needed for a correct answer.
 *  - unw_resume, unw_get_fpreg/unw_set_fpreg and the dynamic-unwind-info API are not supported
 *    (they return -UNW_EINVAL / -UNW_EBADREG).
 *  - Remote unwinding needs registers (access_reg) and memory (access_mem) from the accessors;
 *    modules come from /proc/PID/maps: PID is known when the accessors use ehelf's _UPT_ helpers
 *    (<libunwind-ptrace.h>), and otherwise found among the processes the caller traces.
 *  - unw_get_proc_name names the symbol containing the pc, or fails with -UNW_ENOINFO where
 *    libunwind would name the nearest preceding symbol.
 */
#ifndef EHELF_LIBUNWIND_H
#define EHELF_LIBUNWIND_H

/* Code that checks for libunwind's header finds it included. */
#ifndef LIBUNWIND_H
#define LIBUNWIND_H
#endif

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EHELF_UNWIND 1

/* The libunwind API level this header follows. */
#define UNW_VERSION_MAJOR 1
#define UNW_VERSION_MINOR 6
#define UNW_VERSION_EXTRA 0
#define UNW_VERSION_CODE(maj, min) (((maj) << 16) | (min))
#define UNW_VERSION UNW_VERSION_CODE(UNW_VERSION_MAJOR, UNW_VERSION_MINOR)

#define UNW_TARGET x86_64
#define UNW_TARGET_X86_64 1

typedef uint64_t unw_word_t;
typedef int64_t unw_sword_t;
typedef int unw_regnum_t;
typedef long double unw_tdep_fpreg_t;
typedef unw_tdep_fpreg_t unw_fpreg_t;

/* Register numbers: the DWARF numbering of x86_64, then read-only frame values. */
typedef enum {
  UNW_X86_64_RAX = 0,
  UNW_X86_64_RDX = 1,
  UNW_X86_64_RCX = 2,
  UNW_X86_64_RBX = 3,
  UNW_X86_64_RSI = 4,
  UNW_X86_64_RDI = 5,
  UNW_X86_64_RBP = 6,
  UNW_X86_64_RSP = 7,
  UNW_X86_64_R8 = 8,
  UNW_X86_64_R9 = 9,
  UNW_X86_64_R10 = 10,
  UNW_X86_64_R11 = 11,
  UNW_X86_64_R12 = 12,
  UNW_X86_64_R13 = 13,
  UNW_X86_64_R14 = 14,
  UNW_X86_64_R15 = 15,
  UNW_X86_64_RIP = 16,
  UNW_TDEP_LAST_REG = UNW_X86_64_RIP,
  UNW_X86_64_CFA = 17, /* read-only: the frame's canonical frame address */
  UNW_TDEP_IP = UNW_X86_64_RIP,
  UNW_TDEP_SP = UNW_X86_64_RSP,
  UNW_TDEP_BP = UNW_X86_64_RBP,
  UNW_TDEP_EH = UNW_X86_64_RAX
} x86_64_regnum_t;

/* Architecture-neutral names of a few registers. */
typedef enum {
  UNW_REG_IP = UNW_TDEP_IP, /* the frame's instruction pointer */
  UNW_REG_SP = UNW_TDEP_SP, /* the frame's stack pointer (read-only) */
  UNW_REG_EH = UNW_TDEP_EH,
  UNW_REG_LAST = UNW_TDEP_LAST_REG
} unw_frame_regnum_t;

#define UNW_TDEP_NUM_EH_REGS 2
#define UNW_NUM_EH_REGS UNW_TDEP_NUM_EH_REGS

/* Error codes. Functions return the negated code on failure and a value >= 0 on success. */
typedef enum {
  UNW_ESUCCESS = 0,
  UNW_EUNSPEC = 1,      /* unspecified error */
  UNW_ENOMEM = 2,       /* out of memory (or a name did not fit the buffer) */
  UNW_EBADREG = 3,      /* bad or unknown register */
  UNW_EREADONLYREG = 4, /* the register cannot be written */
  UNW_ESTOPUNWIND = 5,  /* stop unwinding */
  UNW_EINVALIDIP = 6,   /* the instruction pointer is not valid */
  UNW_EBADFRAME = 7,    /* the frame cannot be unwound (bad memory, no progress) */
  UNW_EINVAL = 8,       /* unsupported operation or bad argument */
  UNW_EBADVERSION = 9,  /* unsupported unwind-info version */
  UNW_ENOINFO = 10      /* no unwind info for the instruction pointer */
} unw_error_t;

typedef enum {
  UNW_CACHE_NONE = 0,
  UNW_CACHE_GLOBAL = 1,
  UNW_CACHE_PER_THREAD = 2
} unw_caching_policy_t;

typedef enum {
  UNW_INIT_SIGNAL_FRAME = 1 /* unw_init_local2: the context is a signal's (the ip is exact) */
} unw_init_local2_flags_t;

/* The cursor: opaque, copyable with memcpy. Same size as libunwind's on x86_64. */
#define UNW_TDEP_CURSOR_LEN 127
typedef struct unw_cursor {
  unw_word_t opaque[UNW_TDEP_CURSOR_LEN];
} unw_cursor_t;

/* The machine state captured by unw_getcontext: a ucontext_t, as with libunwind on x86_64, so a
 * signal handler's third argument may be passed to unw_init_local too. */
typedef ucontext_t unw_tdep_context_t;
typedef unw_tdep_context_t unw_context_t;

typedef struct unw_addr_space* unw_addr_space_t;

/* unw_proc_info_t.flags */
#define UNW_PI_FLAG_FIRST_TDEP_BIT 16
#define UNW_PI_FLAG_DEBUG_FRAME 32 /* the info comes from .debug_frame */

/* unw_proc_info_t.format */
typedef enum {
  UNW_INFO_FORMAT_DYNAMIC = 0,
  UNW_INFO_FORMAT_TABLE = 1,
  UNW_INFO_FORMAT_REMOTE_TABLE = 2,
  UNW_INFO_FORMAT_ARM_EXIDX = 3,
  UNW_INFO_FORMAT_IP_OFFSET = 4
} unw_dyn_info_format_t;

typedef struct unw_tdep_proc_info {
  char unused;
} unw_tdep_proc_info_t;

/* The procedure (FDE) containing a frame's pc. */
typedef struct unw_proc_info {
  unw_word_t start_ip; /* first address of the procedure */
  unw_word_t end_ip;   /* one past its last address */
  unw_word_t lsda;     /* language-specific data area, 0 if none */
  unw_word_t handler;  /* personality routine, 0 if none */
  unw_word_t gp;       /* unused on x86_64 */
  unw_word_t flags;    /* UNW_PI_FLAG_* */
  int format;          /* unw_dyn_info_format_t */
  int unwind_info_size;
  void* unwind_info;
  unw_tdep_proc_info_t extra;
} unw_proc_info_t;

/* How a remote address space is read. Every callback gets the address space and the `arg` given
 * to unw_init_remote; `write` is 0 for reads. Callbacks return 0 or a negated unw_error_t. */
typedef struct unw_accessors {
  int (*find_proc_info)(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi,
                        int need_unwind_info, void* arg);
  void (*put_unwind_info)(unw_addr_space_t as, unw_proc_info_t* pi, void* arg);
  int (*get_dyn_info_list_addr)(unw_addr_space_t as, unw_word_t* addr, void* arg);
  int (*access_mem)(unw_addr_space_t as, unw_word_t addr, unw_word_t* value, int write,
                    void* arg);
  int (*access_reg)(unw_addr_space_t as, unw_regnum_t reg, unw_word_t* value, int write,
                    void* arg);
  int (*access_fpreg)(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t* value, int write,
                      void* arg);
  int (*resume)(unw_addr_space_t as, unw_cursor_t* cursor, void* arg);
  int (*get_proc_name)(unw_addr_space_t as, unw_word_t ip, char* buf, size_t size,
                       unw_word_t* offset, void* arg);
} unw_accessors_t;

typedef enum unw_save_loc_type {
  UNW_SLT_NONE = 0,   /* not saved anywhere we know of */
  UNW_SLT_MEMORY = 1, /* saved in memory */
  UNW_SLT_REG = 2     /* saved in another register */
} unw_save_loc_type_t;

typedef struct unw_tdep_save_loc {
  char unused;
} unw_tdep_save_loc_t;

typedef struct unw_save_loc {
  unw_save_loc_type_t type;
  union {
    unw_word_t addr;
    unw_regnum_t regnum;
  } u;
  unw_tdep_save_loc_t extra;
} unw_save_loc_t;

/* ---- address spaces ---- */
extern unw_addr_space_t unw_local_addr_space;
unw_addr_space_t unw_create_addr_space(unw_accessors_t* accessors, int byteorder);
void unw_destroy_addr_space(unw_addr_space_t as);
unw_accessors_t* unw_get_accessors(unw_addr_space_t as);
void unw_flush_cache(unw_addr_space_t as, unw_word_t lo, unw_word_t hi);
int unw_set_caching_policy(unw_addr_space_t as, unw_caching_policy_t policy);
int unw_set_cache_size(unw_addr_space_t as, size_t size, int flags);

/* ehelf extension: builds the unwind tables and compact tables of every module loaded now, from
 * their loaded images, and makes local walks use them (a rule-cache miss then costs a table
 * lookup instead of an .eh_frame search). Libraries loaded later are found as without it.
 * Allocates and lists modules: call it outside signal handlers, e.g. at program start.
 * Returns UNW_ESUCCESS, or -UNW_ENOMEM. */
#define EHELF_UNW_PRELOAD 1
int ehelf_unw_preload(void);

/* ---- walking ---- */
/* Captures the caller's registers: unw_init_local's first frame is the caller of this. */
int unw_getcontext(unw_context_t* context);
int unw_init_local(unw_cursor_t* cursor, unw_context_t* context);
int unw_init_local2(unw_cursor_t* cursor, unw_context_t* context, int flags);
int unw_init_remote(unw_cursor_t* cursor, unw_addr_space_t as, void* arg);
/* Moves to the caller's frame: > 0 done, 0 no caller (end of stack), < 0 error. */
int unw_step(unw_cursor_t* cursor);
int unw_resume(unw_cursor_t* cursor);
/* Fills `buffer` with up to `size` return addresses, starting with the caller's frame. */
int unw_backtrace(void** buffer, int size);

/* ---- the current frame ---- */
int unw_get_reg(unw_cursor_t* cursor, unw_regnum_t reg, unw_word_t* value);
int unw_set_reg(unw_cursor_t* cursor, unw_regnum_t reg, unw_word_t value);
int unw_get_fpreg(unw_cursor_t* cursor, unw_regnum_t reg, unw_fpreg_t* value);
int unw_set_fpreg(unw_cursor_t* cursor, unw_regnum_t reg, unw_fpreg_t value);
int unw_get_save_loc(unw_cursor_t* cursor, int reg, unw_save_loc_t* loc);
int unw_is_signal_frame(unw_cursor_t* cursor);
int unw_is_fpreg(int reg);
int unw_get_proc_info(unw_cursor_t* cursor, unw_proc_info_t* info);
int unw_get_proc_info_by_ip(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* info,
                            void* arg);
int unw_get_proc_name(unw_cursor_t* cursor, char* buf, size_t size, unw_word_t* offset);

/* ---- names ---- */
const char* unw_regname(unw_regnum_t reg);
const char* unw_strerror(int error);

#ifdef __cplusplus
}
#endif

#endif /* EHELF_LIBUNWIND_H */
