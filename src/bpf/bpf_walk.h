/* The in-kernel walk's rows and its step, in C shared by the BPF program (unwind.bpf.c) and its
 * user-space twin (bpf_twin.hpp), so that the backend oracle tests the very step the kernel runs.
 *
 * A file's table is a sorted array of rows, one per address range of the model (each row holds
 * from its pc to the next row's); a gap between functions is a NONE row. pc is relative to the
 * table's base (its lowest address), so that 32 bits reach any file's code.
 *
 * Kinds and their formulas (CFA: the caller's rsp; "at X": the word read at address X):
 *   NONE      no FDE covers the pc: the walk stops (no entry)
 *   CFA_RSP   CFA = rsp + cfa_offset
 *   CFA_RBP   CFA = rbp + cfa_offset                       (stops if rbp is unknown)
 *   CFA_RBX   CFA = rbx + cfa_offset                       (stops if rbx is unknown; ld.so's
 *             lazy-binding trampolines keep the entry's rsp in rbx while they realign it)
 *   PLT       CFA = rsp + cfa_offset + ((rip & 15) >= rbp_offset ? 8 : 0)
 *             (the expression every linker writes for .plt and .plt.sec entries; rbp unchanged)
 *     then, for the four: rip = at CFA + rip_offset, rsp = CFA,
 *                         rbp = at CFA + rbp_offset | unchanged | unknown (EHELF_SAVE_*),
 *                         rbx = at CFA + rbx_offset | unchanged | unknown (EHELF_RBX_*)
 *   SIGNAL    the kernel's rt_sigframe at rsp (__restore_rt): rsp = at rsp + cfa_offset,
 *             rbp = at rsp + rbp_offset, rip = at rsp + rip_offset,
 *             rbx = at rsp + rbx_offset | unchanged (EHELF_RBX_*: AT_CFA | SAME)
 *   END       the return address is undefined: the outermost frame
 *   STOP      a row no kind above expresses (cfa_offset: the reason, UnwindRule's NotExpressible)
 * A row of an FDE with the 'S' augmentation (flags & EHELF_ROW_SIGNAL_FRAME) makes the caller's
 * pc exact: its row is looked up at the pc itself, not at pc - 1.
 *
 * The step and the search are defined where the including file has defined, before including:
 *   EHELF_READ_U64(ctx, addr, out)  0 when the 8 bytes at addr were read into *out
 *   EHELF_ROW_AT(ctx, index)        the row at a global index, or 0
 * (the types alone elsewhere: the loader).
 */
#ifndef EHELF_BPF_WALK_H
#define EHELF_BPF_WALK_H

#include <linux/types.h>

#ifdef __cplusplus
#define EHELF_INLINE inline __attribute__((always_inline))
#else
#define EHELF_INLINE static __inline __attribute__((always_inline))
#endif

enum ehelf_row_kind {
  EHELF_ROW_NONE = 0,
  EHELF_ROW_CFA_RSP = 1,
  EHELF_ROW_CFA_RBP = 2,
  EHELF_ROW_PLT = 3,
  EHELF_ROW_SIGNAL = 4,
  EHELF_ROW_END = 5,
  EHELF_ROW_STOP = 6,
  EHELF_ROW_CFA_RBX = 7,
};

/* flags: how rbp is recovered (two bits), the 'S' augmentation, how rbx is recovered (two
 * bits, the same values shifted). */
enum ehelf_row_flags {
  EHELF_SAVE_SAME = 0,
  EHELF_SAVE_AT_CFA = 1,
  EHELF_SAVE_UNKNOWN = 2,
  EHELF_SAVE_MASK = 3,
  EHELF_ROW_SIGNAL_FRAME = 4,
  EHELF_RBX_SHIFT = 3,
  EHELF_RBX_MASK = EHELF_SAVE_MASK << EHELF_RBX_SHIFT,
};

struct ehelf_bpf_row {
  __u32 pc;         /* the row's first address - the table's base */
  __u8 kind;        /* enum ehelf_row_kind */
  __u8 flags;       /* enum ehelf_row_flags */
  __s16 rip_offset; /* see the kinds */
  __s32 cfa_offset; /* see the kinds; STOP: the reason */
  __s16 rbp_offset; /* see the kinds; PLT: the threshold on rip & 15 */
  __s16 rbx_offset; /* see the kinds */
};

/* A table's page index: entry p is the number of rows that start below p << page_shift (entry
 * page_count: all of them), so that the row covering an address of page p is among rows
 * [entry p - 1, entry p + 1). Four entries fill a row's 16 bytes: the index is stored in rows
 * just before the table's own, in the same pool. */
#define EHELF_PAGE_ENTRIES 4
struct ehelf_bpf_page_entries {
  __u32 rows_before[EHELF_PAGE_ENTRIES];
};

/* Where a table's rows and page index are (in the pool, or in the twin's vectors). */
struct ehelf_bpf_table_view {
  __u64 first_row;
  __u64 first_index;
  __u32 row_count;
  __u32 page_count; /* pages covered; the index holds page_count + 1 entries */
  __u32 page_shift;
};

/* Why a walk in the kernel ended (counted per reason; OK while it goes on). */
enum ehelf_walk_stop {
  EHELF_STOP_OK = 0,
  EHELF_STOP_END = 1,              /* the outermost frame (END row, or a return address of 0) */
  EHELF_STOP_NO_ENTRY = 2,         /* a NONE row: no FDE covers the pc */
  EHELF_STOP_NOT_EXPRESSIBLE = 3,  /* a STOP row */
  EHELF_STOP_BAD_READ = 4,         /* bpf_probe_read_user refused a read */
  EHELF_STOP_MISSING_REGISTER = 5, /* CFA = rbp or rbx + n with that register unknown */
  EHELF_STOP_CFA_NOT_GROWING = 6,  /* the caller's rsp is not above the callee's */
  EHELF_STOP_NO_PROCESS = 7,       /* the process's mappings are not loaded yet */
  EHELF_STOP_NO_MAPPING = 8,       /* the pc is in no mapping (and rbp leads nowhere) */
  EHELF_STOP_NO_TABLE_YET = 9,     /* the file's table is not loaded yet */
  EHELF_STOP_DEPTH = 10,           /* the frame limit */
  EHELF_STOP_ROW_MISSING = 11,     /* a table's row could not be read (a map changing under us) */
  EHELF_STOP_COUNT = 12,
};

struct ehelf_bpf_regs {
  __u64 rip, rsp, rbp, rbx;
  __u8 rbp_known, rbx_known;
  __u8 exact_pc; /* look the pc up as it is (the first frame, after a signal frame) */
};

/* A frame of a walk kept for a later one (the BPF program keeps its CPU's last walk:
 * unwind.bpf.c walk_memo): the registers the walk had there and, when its step was a row's plain
 * one (CFA = rsp, rbp or rbx + n, or a PLT entry's; every read it made succeeded), where that
 * step read the caller's words, relative to the caller's rsp (the CFA). Such a step is a function
 * of the registers and those words (with the row, which the tables' generation keeps): a later
 * walk that reaches the same registers takes it again by reading those words and finding the
 * values the caller's registers hold (ehelf_bpf_memo_check), without its mapping, row and step. */
enum ehelf_memo_flags {
  EHELF_MEMO_STEP = 1,     /* the step to the next frame may be taken so */
  EHELF_MEMO_RBP_READ = 2, /* ... it read the caller's rbp (at the CFA + rbp_offset) */
  EHELF_MEMO_RBX_READ = 4, /* ... and its rbx (at the CFA + rbx_offset) */
};
struct ehelf_memo_frame {
  struct ehelf_bpf_regs regs;
  __u8 flags; /* enum ehelf_memo_flags */
  __u8 reserved;
  __s16 rip_offset, rbp_offset, rbx_offset;
};

/* Whether `a` and `b` are the same registers (every field a step reads): a memo frame's step is
 * taken again only from its very registers. */
EHELF_INLINE int ehelf_bpf_same_regs(const struct ehelf_bpf_regs *a,
                                     const struct ehelf_bpf_regs *b) {
  return a->rip == b->rip && a->rsp == b->rsp && a->rbp == b->rbp && a->rbx == b->rbx &&
         a->rbp_known == b->rbp_known && a->rbx_known == b->rbx_known &&
         a->exact_pc == b->exact_pc;
}

#endif /* the types */

#if defined(EHELF_READ_U64) && defined(EHELF_ROW_AT) && !defined(EHELF_BPF_WALK_STEP)
#define EHELF_BPF_WALK_STEP

/* The step through a SIGNAL row (the kernel's rt_sigframe at rsp), as ehelf_bpf_step takes it;
 * the including file may make it a call of its own (EHELF_SIGNAL_STEP: the BPF program's is a
 * global function, which the verifier checks once, apart from the frame's other paths). */
EHELF_INLINE int ehelf_bpf_signal_step(const struct ehelf_bpf_row *row, struct ehelf_bpf_regs *r,
                                       void *ctx) {
  __u64 rip = 0, rbp = r->rbp;
  __u8 rbp_known = r->rbp_known;
  __u64 rsp = 0;
  if (EHELF_READ_U64(ctx, r->rsp + (__u64)(__s64)row->cfa_offset, &rsp) ||
      EHELF_READ_U64(ctx, r->rsp + (__u64)(__s64)row->rip_offset, &rip))
    return EHELF_STOP_BAD_READ;
  rbp_known = EHELF_READ_U64(ctx, r->rsp + (__u64)(__s64)row->rbp_offset, &rbp) == 0;
  /* (rbx last: it is read from the callee's rsp, which it replaces) */
  if ((row->flags & EHELF_RBX_MASK) == (EHELF_SAVE_AT_CFA << EHELF_RBX_SHIFT))
    r->rbx_known = EHELF_READ_U64(ctx, r->rsp + (__u64)(__s64)row->rbx_offset, &r->rbx) == 0;
  r->rip = rip;
  r->rsp = rsp;
  r->rbp = rbp;
  r->rbp_known = rbp_known;
  r->exact_pc = 1;
  return EHELF_STOP_OK;
}
#ifndef EHELF_SIGNAL_STEP
#define EHELF_SIGNAL_STEP(ctx, row, r) ehelf_bpf_signal_step(row, r, ctx)
#endif

/* One step through `row`: `r` become the caller's registers, or a stop reason and `r` unchanged. */
EHELF_INLINE int ehelf_bpf_step(const struct ehelf_bpf_row *row, struct ehelf_bpf_regs *r,
                                void *ctx) {
  __u64 cfa, rip = 0, rbp = r->rbp;
  __u8 rbp_known = r->rbp_known;
  switch (row->kind) {
  case EHELF_ROW_CFA_RSP:
    cfa = r->rsp + (__u64)(__s64)row->cfa_offset;
    break;
  case EHELF_ROW_CFA_RBP:
    if (!r->rbp_known) return EHELF_STOP_MISSING_REGISTER;
    cfa = r->rbp + (__u64)(__s64)row->cfa_offset;
    break;
  case EHELF_ROW_CFA_RBX:
    if (!r->rbx_known) return EHELF_STOP_MISSING_REGISTER;
    cfa = r->rbx + (__u64)(__s64)row->cfa_offset;
    break;
  case EHELF_ROW_PLT:
    cfa = r->rsp + (__u64)(__s64)row->cfa_offset +
          ((r->rip & 15) >= (__u64)(__s64)row->rbp_offset ? 8 : 0);
    break;
  case EHELF_ROW_SIGNAL:
    return EHELF_SIGNAL_STEP(ctx, row, r);
  case EHELF_ROW_END:
    return EHELF_STOP_END;
  case EHELF_ROW_NONE:
    return EHELF_STOP_NO_ENTRY;
  default:
    return EHELF_STOP_NOT_EXPRESSIBLE;
  }
  if (EHELF_READ_U64(ctx, cfa + (__u64)(__s64)row->rip_offset, &rip)) return EHELF_STOP_BAD_READ;
  switch (row->flags & EHELF_SAVE_MASK) {
  case EHELF_SAVE_AT_CFA:
    rbp_known = EHELF_READ_U64(ctx, cfa + (__u64)(__s64)row->rbp_offset, &rbp) == 0;
    break;
  case EHELF_SAVE_UNKNOWN:
    rbp_known = 0;
    break;
  default:
    break;
  }
  /* rbx: most rows leave it as it is (one test). Past the return address's read nothing fails:
   * it is written in place. */
  if (row->flags & EHELF_RBX_MASK) {
    if ((row->flags & EHELF_RBX_MASK) == (EHELF_SAVE_AT_CFA << EHELF_RBX_SHIFT))
      r->rbx_known = EHELF_READ_U64(ctx, cfa + (__u64)(__s64)row->rbx_offset, &r->rbx) == 0;
    else
      r->rbx_known = 0;
  }
  r->rip = rip;
  r->rsp = cfa;
  r->rbp = rbp;
  r->rbp_known = rbp_known;
  r->exact_pc = (row->flags & EHELF_ROW_SIGNAL_FRAME) != 0;
  return EHELF_STOP_OK;
}

/* What `memo` keeps of the step through `row` that left `caller`: EHELF_MEMO_STEP and where it
 * read the caller's words when it was a plain one, else no flag (its registers are the
 * caller's). */
EHELF_INLINE void ehelf_bpf_memo_record(struct ehelf_memo_frame *memo,
                                        const struct ehelf_bpf_row *row,
                                        const struct ehelf_bpf_regs *caller) {
  memo->flags = 0;
  if (row->kind != EHELF_ROW_CFA_RSP && row->kind != EHELF_ROW_CFA_RBP &&
      row->kind != EHELF_ROW_CFA_RBX && row->kind != EHELF_ROW_PLT)
    return;
  if (row->flags & EHELF_ROW_SIGNAL_FRAME) return;
  __u8 flags = EHELF_MEMO_STEP;
  if ((row->flags & EHELF_SAVE_MASK) == EHELF_SAVE_AT_CFA) {
    if (!caller->rbp_known) return; /* (its read failed) */
    flags |= EHELF_MEMO_RBP_READ;
  }
  if ((row->flags & EHELF_RBX_MASK) == (EHELF_SAVE_AT_CFA << EHELF_RBX_SHIFT)) {
    if (!caller->rbx_known) return;
    flags |= EHELF_MEMO_RBX_READ;
  }
  memo->rip_offset = row->rip_offset;
  memo->rbp_offset = row->rbp_offset;
  memo->rbx_offset = row->rbx_offset;
  memo->flags = flags;
}

/* Whether the stack holds, where the step kept in `memo` read them, the words that made
 * `caller`'s registers (1): the step from memo's registers then leaves `caller` again. */
EHELF_INLINE int ehelf_bpf_memo_check(void *ctx, const struct ehelf_memo_frame *memo,
                                      const struct ehelf_bpf_regs *caller) {
  const __u64 cfa = caller->rsp;
  __u64 word = 0;
  if (EHELF_READ_U64(ctx, cfa + (__u64)(__s64)memo->rip_offset, &word) || word != caller->rip)
    return 0;
  if ((memo->flags & EHELF_MEMO_RBP_READ) &&
      (EHELF_READ_U64(ctx, cfa + (__u64)(__s64)memo->rbp_offset, &word) || word != caller->rbp))
    return 0;
  if ((memo->flags & EHELF_MEMO_RBX_READ) &&
      (EHELF_READ_U64(ctx, cfa + (__u64)(__s64)memo->rbx_offset, &word) || word != caller->rbx))
    return 0;
  return 1;
}

/* One round of ehelf_bpf_search_rows' binary search of the rows from `first` for `rel`, knowing
 * that rows before *lo start at or below rel and rows from *hi above it: 1 when the search is
 * over (*lo <= *hi met), 0 to go on, -1 when a row could not be read. */
EHELF_INLINE int ehelf_bpf_search_round(void *ctx, __u64 first, __u32 rel, __u32 *lo, __u32 *hi) {
  if (*lo >= *hi) return 1;
  const __u32 mid = *lo + (*hi - *lo) / 2;
  const struct ehelf_bpf_row *row = EHELF_ROW_AT(ctx, first + mid);
  if (!row) return -1;
  if (row->pc <= rel)
    *lo = mid + 1;
  else
    *hi = mid;
  return 0;
}

/* The search's rounds, at most 32 (any table's): 0, or -1 when a row could not be read. The
 * including file may run them another way (EHELF_SEARCH_ROUNDS: the BPF program's bpf_loop). */
#ifndef EHELF_SEARCH_ROUNDS
#define EHELF_SEARCH_ROUNDS(ctx, first, rel, lo, hi) ehelf_bpf_search_rounds(ctx, first, rel, lo, hi)
EHELF_INLINE int ehelf_bpf_search_rounds(void *ctx, __u64 first, __u32 rel, __u32 *lo, __u32 *hi) {
  for (int round = 0; round < 32; round++) {
    const int done = ehelf_bpf_search_round(ctx, first, rel, lo, hi);
    if (done) return done < 0 ? -1 : 0;
  }
  return 0;
}
#endif

/* The global index of the row covering `rel` (relative to the table's base) among the rows from
 * `first`, knowing that rows before `lo` start at or below rel and rows from `hi` above it; or -1
 * (before the first row, or a row that could not be read). */
EHELF_INLINE __s64 ehelf_bpf_search_rows(void *ctx, __u64 first, __u32 lo, __u32 hi, __u32 rel) {
  if (EHELF_SEARCH_ROUNDS(ctx, first, rel, &lo, &hi) < 0) return -1;
  return lo == 0 ? -1 : (__s64)(first + lo - 1);
}

/* Entry `page` of a page index (EHELF_PAGE_ENTRIES to a row, from `first_index`) into *out; 0
 * when read. */
EHELF_INLINE int ehelf_bpf_page_entry(void *ctx, __u64 first_index, __u32 page, __u32 *out) {
  const struct ehelf_bpf_row *row = EHELF_ROW_AT(ctx, first_index + page / EHELF_PAGE_ENTRIES);
  if (!row) return -1;
  const struct ehelf_bpf_page_entries *entries = (const struct ehelf_bpf_page_entries *)row;
  *out = entries->rows_before[page % EHELF_PAGE_ENTRIES];
  return 0;
}

/* The global index of the row of `t` covering `rel`, or -1: the page index bounds the search to
 * the rows that start in rel's page (and the one before them), a few where a binary search over
 * the whole table would read a cache line per round. Bounds that do not make sense (a table
 * being replaced under the walk) fall back to the whole table. */
EHELF_INLINE __s64 ehelf_bpf_find_row(void *ctx, const struct ehelf_bpf_table_view *t, __u32 rel) {
  __u32 lo = t->row_count, hi = t->row_count;
  const __u32 page = rel >> (t->page_shift & 31);
  if (page < t->page_count) {
    if (ehelf_bpf_page_entry(ctx, t->first_index, page, &lo) ||
        ehelf_bpf_page_entry(ctx, t->first_index, page + 1, &hi) || lo > hi || hi > t->row_count) {
      lo = 0;
      hi = t->row_count;
    }
  }
  return ehelf_bpf_search_rows(ctx, t->first_row, lo, hi, rel);
}

#endif /* the step */
