/* The in-kernel walk's maps as both sides see them: the BPF program (unwind.bpf.c) and its
 * loader (kernel_walk.cpp). Sizes are the defaults; the loader may change the pools'. */
#ifndef EHELF_BPF_MAPS_H
#define EHELF_BPF_MAPS_H

#include <linux/types.h>

#include "bpf_walk.h"

/* At least the 512 frames of the user-space walk; a power of two, so that an index masked with
 * EHELF_MAX_FRAMES - 1 is one the verifier sees in bounds. */
#define EHELF_MAX_FRAMES 512
#define EHELF_MAX_FRAMES_SHIFT 9
/* Rows come in shards of 2^20 (16 MiB each), made when the tables need them: 64 shards hold
 * 67 million rows, far more than every file of this machine's together. */
#define EHELF_SHARD_BITS 20
#define EHELF_SHARD_ROWS (1u << EHELF_SHARD_BITS)
#define EHELF_MAX_SHARDS 64
#define EHELF_MAX_TABLES 65536
#define EHELF_MAX_MAPPINGS (1u << 18)
#define EHELF_MAX_PROCESSES 32768
/* The stacks map holds a stack as chunks of EHELF_STACK_CHUNK pcs (a 22-frame stack is one
 * 264-byte entry): inserting a whole 512-frame value cost a sample ~2.5 us (a 4 KiB allocation
 * and copy into cold memory) where the walk itself costs about as much. */
#define EHELF_STACK_CHUNK 32

/* Words of a process's aux vector the walk reads (mm_struct's saved_auxv: 2 * 26 on x86_64). */
#define EHELF_AUXV_WORDS 64

#define EHELF_MAX_STACK_CHUNKS 32768
#define EHELF_MAX_COUNTS 65536
#define EHELF_MAX_KERNEL_STACKS 16384
#define EHELF_KERNEL_FRAMES 127 /* the kernel's perf_event_max_stack default */
#define EHELF_NOT_EXPRESSIBLE_KINDS 16

/* A file's rows: [first_row, first_row + row_count) of the pool, its page index from first_index
 * (bpf_walk.h); pcs relative to `base`. A row_count of 0: no table (written last when loading,
 * first when freeing). */
struct ehelf_table {
  struct ehelf_bpf_table_view rows;
  __u64 base;
};

enum ehelf_mapping_kind {
  EHELF_MAPPING_TABLE = 0,         /* rows in `table` */
  EHELF_MAPPING_FRAME_POINTER = 1, /* a file without tables: rbp is followed */
  /* (A table being built is a TABLE mapping whose table has no rows yet.) */
  /* Only in a walk's found mappings (found with bpf_find_vma): */
  EHELF_MAPPING_NO_FILE = 2,      /* executable memory of no file: JIT code, rbp is followed */
  EHELF_MAPPING_UNKNOWN_FILE = 3, /* a file user space has not published (yet) */
};

/* [start, end) of a process maps a file whose address A is at A + bias. */
struct ehelf_mapping {
  __u64 start;
  __u64 end;
  __u64 bias;
  __u32 table;
  __u32 kind; /* enum ehelf_mapping_kind */
};

/* A file as the kernel names it, for the walk of a pc in none of the process's mappings user
 * space wrote (a process that exec'd since, or a library dlopen'd since): bpf_find_vma gives the
 * pc's mapping and its file's inode, this map the file's table. The same fields as the stat(2)
 * user space keys its tables by (a file rewritten in place has another mtime), the device in the
 * kernel's encoding (MAJOR << 20 | MINOR). */
struct ehelf_file_key {
  __u64 ino;
  __u64 size;
  __s64 mtime_sec;
  __u32 mtime_nsec;
  __u32 dev;
};

/* The file's executable segments (at most EHELF_FILE_SEGMENTS), for a mapping's bias: a mapping
 * whose file offset O is in [offset, offset + filesz) maps address vaddr + O - offset at its
 * start. A file with more has only these walked this way. */
#define EHELF_FILE_SEGMENTS 2
struct ehelf_file_segment {
  __u64 offset;
  __u64 filesz;
  __u64 vaddr;
};

struct ehelf_file {
  __u32 table;
  __u32 kind; /* EHELF_MAPPING_TABLE or _FRAME_POINTER */
  __u32 segment_count;
  __u32 reserved;
  struct ehelf_file_segment segments[EHELF_FILE_SEGMENTS];
};

/* The interpreter most programs name (ld.so), as user space publishes it: its file's key in
 * `files`, and where its build ID's bytes are (a vaddr in it) for a process's own copy to be
 * checked against (a program may name another interpreter). */
struct ehelf_interpreter {
  struct ehelf_file_key key;
  __u64 id_vaddr;
  __u64 id[3]; /* the build ID's first 24 bytes, zero-padded */
  __u32 id_size; /* 0: none published */
  __u32 reserved;
};

struct ehelf_process {
  __u32 first_mapping; /* in the mappings pool */
  __u32 mapping_count;
  /* The process's address space (its mm_struct's address) when the program first walked it
   * after user space wrote the entry (0 until then): a sample in another one comes after an
   * exec, whose mappings user space has not read yet. */
  __u64 address_space;
  /* 1: its parent's mappings, written at its fork: the first walk takes them only if the
   * process still runs its parent's program (it may have exec'd before its first sample). */
  __u32 inherited;
  __u32 reserved;
  /* The address space user space read the mappings of, by where its code and its stack begin
   * (/proc/PID/stat: mm start_code, start_stack; 0: unknown): the first walk takes the entry
   * only in an address space that has them. (A process that exec'd between the read and its
   * first walk was walked with the program before's mappings, its pcs in no known module.) */
  __u64 start_code;
  __u64 start_stack;
};

/* A program a process ran before its exec, or before it exited, while samples of it waited in
 * the kernel (ehelf_parked): its mappings in the pool, for the samples taken while it ran
 * (sampled_at in [valid_from, valid_to), CLOCK_MONOTONIC ns: its exec or fork, and the exec or
 * exit that ended it). A process's entry in `processes` describes its present program only. */
#define EHELF_PAST_PROGRAMS 4
struct ehelf_past_program {
  __u64 valid_from, valid_to;
  __u32 first_mapping, mapping_count;
};
struct ehelf_past_programs {
  struct ehelf_past_program programs[EHELF_PAST_PROGRAMS]; /* unused: mapping_count 0 */
};

struct ehelf_stack {
  __u32 depth;
  __u32 stop; /* enum ehelf_walk_stop */
  __u64 pcs[EHELF_MAX_FRAMES];
};

/* The stacks map's entries: the pcs [chunk * EHELF_STACK_CHUNK, + EHELF_STACK_CHUNK) of the
 * stack whose hash is `stack` (the counts' key), with the whole stack's depth and stop. Chunk 0
 * is written last: a stack whose chunk 0 is in the map has all its chunks there. */
struct ehelf_stack_key {
  __u64 stack;
  __u32 chunk;
  __u32 reserved;
};
struct ehelf_stack_chunk {
  __u32 depth;
  __u32 stop;
  __u64 pcs[EHELF_STACK_CHUNK];
};

/* A sample handed to perf with its stack copy too (copy mode): the kernel's walk of it, and the
 * registers it started from, which the sample's own say again. */
struct ehelf_copy {
  __u32 tid;
  __u32 outside; /* frames stepped by following rbp from code in no mapping it knew */
  __u64 ip;
  __u64 sp;
  /* When the program began with the sample (CLOCK_MONOTONIC ns): perf times its sample just
   * after the program returns, so that a walk parked and sent late still finds its sample
   * among others of the same thread from the same registers. */
  __u64 time;
  __u32 parked; /* walked again from the sample's parked stack (its first 16 KiB) */
  /* The thread ran in its parent's address space (a vfork child: dash runs every command so),
   * on its parent's stack: once the child's exec lets the parent run, before the new address
   * space replaces the old, the parent may write that stack between the walk's reads and perf's
   * copy. */
  __u32 parents_space;
  struct ehelf_stack stack;
};

/* The bytes of the sampled stack last read, from `base`: one bpf_probe_read_user costs about as
 * much for a kilobyte as for 8 bytes (~80 ns here), and the next frames' words are mostly just
 * above the last ones read. A power of two (the verifier's bound on an offset into it). */
#define EHELF_WINDOW_BYTES 1024
struct ehelf_stack_window {
  __u64 base;
  __u32 length; /* 0: empty */
  __u32 reserved;
  __u8 bytes[EHELF_WINDOW_BYTES];
};

/* Mappings found with bpf_find_vma, kept per process (the `learned` map) while user space has
 * not read its own: a program, libc, ld.so and a few libraries. bpf_find_vma can be called once
 * per sample (the mmap lock it takes in the interrupt is released by an irq_work, which is busy
 * until the program returns), so a process's files are learned one per sample: a walk that needs
 * a second one it does not know stops there. */
#define EHELF_FOUND_MAPPINGS 8
struct ehelf_learned {
  __u64 address_space; /* the mm they were found in */
  __u32 count;
  __u32 next; /* the one replaced when full */
  struct ehelf_mapping found[EHELF_FOUND_MAPPINGS];
};

/* The address space a process had when the program last sampled it, and since when (the spaces
 * map; ehelf_count_key.space_since). */
struct ehelf_space {
  __u64 address_space;
  __u64 since;
};

/* Which walk a CPU's memo holds: its frames are valid for samples of the same process, address
 * space, mappings and tables (unwind.bpf.c: memo_usable). */
struct ehelf_memo {
  __u64 space;
  __u32 tgid;
  __u32 process_generation;
  __u32 table_generation;
  __u32 first_mapping;
  __u32 mapping_count;
  __u32 frames; /* 0: none */
  __u32 buffer; /* which of the CPU's two buffers holds them (the next walk writes the other) */
  __u32 reserved;
};

/* One walk in progress, per CPU (too large for the BPF stack). */
struct ehelf_walk {
  struct ehelf_bpf_regs regs;
  __u64 hash;
  __u32 tgid;
  __u32 first_mapping;
  __u32 mapping_count;
  __u32 last_mapping; /* where find_mapping looks first */
  __u32 depth;
  __u32 stop;
  __u32 signal;        /* the last step went through a signal frame */
  __u32 known_process; /* its mappings are those user space wrote (or its parent's) */
  __u32 stack_reads;   /* bpf_probe_read_user calls of this sample's walk */
  __u32 mapping_written; /* the frame's mapping is one user space wrote (not one found here) */
  __u8 learned_read;  /* `learned` holds the process's entry of the learned map, if any */
  __u8 vma_asked;     /* bpf_find_vma was called in this sample */
  __u8 learned_added; /* `learned` gained a mapping: written back at the end */
  __u8 vma_deferred;  /* a pc was in no mapping known, and bpf_find_vma was used already */
  struct ehelf_learned learned;
  struct {
    __u32 tgid;
    __u32 generation; /* unwind.bpf.c's process_generation when read */
    __u64 address_space;
    __u32 first_mapping;
    __u32 mapping_count;
    __u32 valid;
    __u32 reserved;
  } last_process; /* the processes map's entry this CPU read last (kept across samples) */
  struct {
    __u32 tgid;
    __u32 reserved;
    struct ehelf_space space;
  } last_space;      /* the spaces map's entry this CPU used last (kept across samples) */
  __u64 space_since; /* the sample's ehelf_count_key.space_since */
  struct ehelf_copy copy;
  struct ehelf_stack_window window;
  struct ehelf_stack_chunk chunk; /* one chunk of copy.stack, as the stacks map takes it */
  struct ehelf_bpf_row row;       /* the row a search found (unwind.bpf.c: search_table) */
  __u64 word;                     /* the word refill_window read */
  __u32 stack_stored;             /* store_stack's result (its bpf_loop callback's) */
  __u32 reserved_stored;
  __u64 auxv[EHELF_AUXV_WORDS]; /* the process's aux vector (unwind.bpf.c: interpreter_base) */
  __u64 saved_regs[21]; /* the sample's user registers (a pt_regs: unwind.bpf.c user_regs) */
  struct ehelf_bpf_regs start_regs; /* the walk's first registers (a sample parked keeps them) */
  __u64 space;                      /* the address space walked (its mm) */
  __u32 replaying;                  /* a parked sample's walk: its stack is the parked copy */
  __u32 reserved_replaying;
  struct ehelf_memo memo; /* this CPU's last walk (kept across samples) */
  __u32 memo_usable;      /* its frames may be taken by this walk */
  __u32 memo_cursor;      /* its first frame not below this walk's rsp, as far as looked */
  __u32 memo_taking;      /* 1: this walk takes its frames, from memo_next */
  __u32 memo_next;
  __u32 memo_taken;   /* frames this walk took from it */
  __u32 memo_changed; /* ... and steps it did not take: the words read were not those of then */
};

/* A sample whose walk stopped for want of a table (its process's mappings, or a file's rows,
 * not loaded yet: a process's first milliseconds, a large file's build), kept in the kernel
 * until user space has loaded what it needs, then walked again (unwind.bpf.c: park,
 * ehelf_replay): its registers, what its count needs, and EHELF_PARK_BYTES of its stack from
 * rsp (perf's default stack copy: deeper frames are walked as far as those bytes go). ehelf
 * never reads them: the maps that hold them are made BPF_F_WRONLY, so that the kernel refuses
 * reads through ehelf's descriptors (root can still read any map by its id, as it can read any
 * process's memory). */
#define EHELF_PARK_BYTES 16384
#define EHELF_PARK_ENTRIES 1024 /* ~20 MiB of kernel memory, made at load */
struct ehelf_parked {
  struct ehelf_bpf_regs regs; /* at the sample */
  __u64 space;                /* the address space (mm) sampled */
  __u64 start_code;           /* ... where its code and its stack begin (ehelf_process) */
  __u64 start_stack;
  __u64 space_since;
  __u64 sampled_at; /* CLOCK_MONOTONIC ns (ehelf_copy's time) */
  __u64 period;
  __u32 tgid;
  __u32 tid;
  __s32 kernel; /* the sample's kernel stack id, or negative */
  __u32 copy;   /* copy mode: perf has the sample's stack copy; the walk goes to `copies` */
  __u32 length; /* bytes of the stack in `bytes`, from regs.rsp */
  __u32 round;  /* the replay round that put it back last (ehelf_replay) */
  __u32 parents_space; /* ehelf_copy's */
  /* The parent's tgid when the process ran its parent's program (a fork that has not exec'd
   * yet), else 0: a sample that waited while the process exec'd walks with the parent's entry. */
  __u32 parent;
  char comm[16];
  /* (A page more: the verifier's bound on the last page's read, at an offset below 16 KiB.) */
  __u8 bytes[EHELF_PARK_BYTES + 4096];
};

/* The in-kernel walk's row cache (unwind.bpf.c: row_cache): 2^12 entries per CPU. */
#define EHELF_ROW_CACHE_BITS 12
struct ehelf_row_cache_entry {
  __u32 table;
  __u32 rel; /* the pc looked up, relative to the table's base */
  __u32 generation;
  __u32 reserved;
  struct ehelf_bpf_row row;
};

struct ehelf_count_key {
  __u64 stack; /* the stacks map's key */
  __u32 pid;
  __u32 tid;
  __s32 kernel; /* kernel_stack_traces' id, or negative: none */
  __u32 reserved;
  /* When the program first sampled user code in the process's address space (CLOCK_MONOTONIC
   * ns; 0: unknown, no user stack or no such sample yet): after the exec that made it, before
   * the next. User space names the stack with the
   * mappings the process had then: a program that exec'd another since (a shell's exec, env, a
   * version manager's shim) has other mappings now. */
  __u64 space_since;
};


struct ehelf_count {
  __u64 samples;
  __u64 period;
  char comm[16];
};

struct ehelf_request {
  __u32 tgid;
  __u32 reason; /* EHELF_STOP_NO_PROCESS, _NO_TABLE_YET or _NO_MAPPING */
  __u64 pc;
};

/* The stats map's counters (per CPU, summed by the loader). */
enum ehelf_stat {
  EHELF_STAT_SAMPLES = 0,
  EHELF_STAT_FRAMES = 1,
  EHELF_STAT_REQUESTS_LOST = 2,
  EHELF_STAT_COUNTS_FULL = 3,
  EHELF_STAT_STACKS_FULL = 4,
  EHELF_STAT_COPIES_LOST = 5,
  EHELF_STAT_VMA_FILES = 6,   /* mappings found with bpf_find_vma, of a file with a table */
  EHELF_STAT_VMA_UNKNOWN = 7, /* ... of a file user space had not published */
  EHELF_STAT_ROW_MISSES = 8,  /* rows not in the row cache: found in their table */
  EHELF_STAT_STACK_READS = 9, /* bpf_probe_read_user calls of the walks (windows and words) */
  EHELF_STAT_INTERPRETER = 10, /* mappings of the interpreter found by its aux vector entry */
  EHELF_STAT_PARKED = 11,      /* samples parked for their tables (ehelf_parked) */
  EHELF_STAT_PARK_FULL = 12,   /* ... not parked: the queue was full */
  EHELF_STAT_REPLAYED = 13,    /* parked samples walked again and counted */
  EHELF_STAT_STOPS = 14,       /* + enum ehelf_walk_stop */
  EHELF_STAT_NOT_EXPRESSIBLE = EHELF_STAT_STOPS + EHELF_STOP_COUNT, /* + the STOP row's reason */
  /* frames taken from the CPU's last walk (ehelf_memo_frame), and its steps not taken: the
   * stack's words had changed */
  EHELF_STAT_MEMO_FRAMES = EHELF_STAT_NOT_EXPRESSIBLE + EHELF_NOT_EXPRESSIBLE_KINDS,
  EHELF_STAT_MEMO_CHANGED,
  EHELF_STAT_COUNT,
};

#endif
