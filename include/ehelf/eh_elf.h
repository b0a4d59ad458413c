/* ehelf/eh_elf.h: the ABI of compiled unwind tables ("eh_elf" shared objects).
 *
 * `ehelf compile FILE -o OUT.so` turns FILE's .eh_frame/.debug_frame into native code. The object
 * exports the symbols below. Given the registers of a frame at a program counter, the unwind
 * functions compute the caller's registers in place, with no table interpretation.
 *
 * Addresses: `pc` is an address as linked in FILE (an SVMA). A runtime that finds FILE loaded at
 * bias B passes (actual pc - B). Register values and memory addresses are actual addresses.
 * Whether to look up the return address or the return address - 1 is the caller's choice.
 */
#ifndef EHELF_EH_ELF_H
#define EHELF_EH_ELF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EHELF_ABI_VERSION 1u

/* Register slots of a context. The minimal set uses the first four. */
enum ehelf_register {
  EHELF_RIP = 0,
  EHELF_RSP = 1,
  EHELF_RBP = 2,
  EHELF_RBX = 3,
  EHELF_R12 = 4,
  EHELF_R13 = 5,
  EHELF_R14 = 6,
  EHELF_R15 = 7,
  EHELF_NREGS = 8
};

/* Which registers an object tracks (ehelf_info.register_set). */
enum ehelf_register_set {
  EHELF_REGISTERS_MINIMAL = 0,      /* rip, rsp, rbp, rbx: enough for backtraces */
  EHELF_REGISTERS_CALLEE_SAVED = 1  /* rip, rsp, rbp, rbx, r12-r15: exceptions, debuggers */
};

/* Context flags: bit i (i < EHELF_NREGS) says regs[i] holds a known value. */
#define EHELF_VALID(reg) (1u << (reg))
#define EHELF_FLAG_SIGNAL_FRAME (1u << 16) /* output: the FDE has the 'S' augmentation */
#define EHELF_FLAG_ERROR (1u << 31)        /* output: the unwind failed (see the return code) */

typedef struct ehelf_context {
  uint64_t regs[EHELF_NREGS]; /* indexed by enum ehelf_register */
  uint32_t flags;
  uint32_t reserved;
  /* The local variant reads memory only inside [stack_lo, stack_hi): a corrupt stack or table
   * cannot make it fault. Set both to 0 and UINT64_MAX to allow any read. */
  uint64_t stack_lo;
  uint64_t stack_hi;
} ehelf_context_t;

/* Return codes of the unwind functions. On anything but EHELF_OK the context's registers are
 * unchanged and EHELF_FLAG_ERROR is set. */
enum ehelf_status {
  EHELF_OK = 0,
  EHELF_NO_ENTRY = 1,          /* pc is not covered by any FDE */
  EHELF_NEEDS_INTERPRETER = 2, /* the row uses a rule this object does not compile: interpret it */
  EHELF_BAD_READ = 3,          /* a memory read was refused (outside the stack, or by deref) */
  EHELF_MISSING_REGISTER = 4   /* a rule needs a register whose value is not known */
};

/* Remote memory access: store the 8 bytes at addr into *value and return 0, or return non-zero. */
typedef int (*ehelf_deref_fn)(uint64_t addr, uint64_t* value, void* arg);

/* Describes the object. */
struct ehelf_info {
  uint32_t abi_version;   /* EHELF_ABI_VERSION */
  uint32_t register_set;  /* enum ehelf_register_set */
  uint32_t build_id_size; /* bytes of build_id used; 0 if the source had no build-id */
  uint8_t build_id[64];   /* the source ELF's GNU build-id: refuse a mismatched pair */
  uint64_t pc_low;        /* lowest and one past the highest pc covered */
  uint64_t pc_high;
  uint64_t ranges;        /* address ranges in the lookup table */
  uint64_t bodies;        /* distinct compiled row bodies */
  uint64_t fallback_rows; /* bodies that answer EHELF_NEEDS_INTERPRETER */
};

/* The symbols every eh_elf exports. */
extern const struct ehelf_info ehelf_eh_elf_info;
/* Unwinds one frame reading memory directly (within ctx->stack_lo/hi). */
int ehelf_unwind_local(uint64_t pc, ehelf_context_t* ctx);
/* Unwinds one frame reading every word through deref (stack snapshots, other processes). */
int ehelf_unwind_remote(uint64_t pc, ehelf_context_t* ctx, ehelf_deref_fn deref, void* arg);

#define EHELF_INFO_SYMBOL "ehelf_eh_elf_info"
#define EHELF_UNWIND_LOCAL_SYMBOL "ehelf_unwind_local"
#define EHELF_UNWIND_REMOTE_SYMBOL "ehelf_unwind_remote"

#ifdef __cplusplus
}
#endif

#endif /* EHELF_EH_ELF_H */
