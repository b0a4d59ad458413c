/* ehelf's in-kernel walk (seed 004): attached to each sampling perf event, it walks the sampled
 * thread's user stack with bpf_probe_read_user and the rows of bpf_walk.h that user space built
 * from ehelf's model, and counts the stack in a map. No stack bytes leave the kernel: user space
 * reads the counted stacks' addresses (and, in the copy mode used to test it, the walks of the
 * samples it also asked the stack copy of).
 *
 * Maps (sizes set by the loader, kernel_walk.cpp):
 *   processes  tgid -> its mappings: a range of the mappings pool, sorted by start
 *   mappings   the pool: [start, end) -> a table (or how to walk without one)
 *   tables     table id -> its range of rows in the row pool
 *   row_shards the row pool: shards of 2^20 rows (array of maps), added as tables need them, so
 *              that no file is ever skipped for a full shard
 *   stacks     (hash of a walk, chunk) -> 32 of its pcs (kept until user space evicts them)
 *   counts0/counts1: (stack, pid, tid, kernel stack) -> samples, period, comm; user space
 *              drains the one not in use (`active`)
 *   files      a file's inode -> its table, for pcs in none of a process's mappings
 *   learned    tgid -> the mappings the program found itself (bpf_find_vma) in that process
 *   requests   (tgid, pc) of samples in a process or at an address with no table yet
 *   parked     samples whose walk stopped for want of a table, with their stack's bytes, until
 *              user space has loaded it (ehelf_replay walks them again)
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/ptrace.h>
#include <linux/types.h>

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "bpf_maps.h"

#define EHELF_READ_U64(ctx, addr, out) read_user((struct ehelf_walk *)(ctx), (addr), (out))
#define EHELF_ROW_AT(ctx, index) row_at(index)
#define EHELF_SEARCH_ROUNDS(ctx, first, rel, lo, hi) search_rounds(first, rel, lo, hi)

static const struct ehelf_bpf_row *row_at(__u64 index);
static int read_user(struct ehelf_walk *w, __u64 addr, __u64 *out);
static int search_rounds(__u64 first, __u32 rel, __u32 *lo, __u32 *hi);
int signal_step(const struct ehelf_bpf_row *row, struct ehelf_bpf_regs *r, struct ehelf_walk *w);
#define EHELF_SIGNAL_STEP(ctx, row, r) signal_step((row), (r), (struct ehelf_walk *)(ctx))

#include "bpf_walk.h" /* again: now the step */

char LICENSE[] SEC("license") = "Dual MIT/GPL"; /* bpf_probe_read_user is for GPL programs */

/* Set by the loader before load. */
const volatile __u32 max_depth = EHELF_MAX_FRAMES;
const volatile __u32 copy_every = 0; /* also hand every Nth sample to perf (its stack copy) */
const volatile __u32 kernel_stacks = 1;
const volatile __u32 find_mappings_only = 0; /* KernelWalkOptions::find_mappings_only */

/* Which counts map the program writes (user space flips it, then drains the other). */
volatile __u32 active = 0;

/* 1: samples are dropped, not walked (user space is loading the tables of what runs when -a or
 * -p starts, so that the profile's first samples walk like its others). */
volatile __u32 held = 0;

/* Bumped by user space whenever it publishes or withdraws a table's rows: rows cached before
 * belong to another generation (a table id is reused for another file once freed). */
volatile __u32 table_generation = 0;
/* Bumped by user space whenever it writes or deletes a process's entry (ehelf_walk's
 * last_process is then read again). */
volatile __u32 process_generation = 0;

/* 1: a walk that stops for want of a table parks its sample (KernelWalkOptions::park, set by the
 * loader; ehelf_replay is loaded when a sample is first parked, kernel_walk.cpp load_replay, and
 * the summary says how many parked samples were never walked again if it cannot be). */
volatile __u32 park_samples = 0;
/* Parked samples not counted yet (park adds, ehelf_replay takes away): user space runs the
 * replay while there are any. */
volatile __u64 parked_waiting = 0;
/* Set by user space before each run of ehelf_replay: its round (a sample it puts back is marked
 * with it, and met again ends the run), and whether to count every parked sample now, walked
 * to its end or not (the recording's end). */
volatile __u32 replay_round = 0;
volatile __u32 replay_final = 0;

/* The interpreter most programs name (ld.so), set by the loader before any sample (id_size 0:
 * none): learn_interpreter. */
struct ehelf_interpreter interpreter = {};

/* The vDSO's table (no file names it; every process maps the same image): its id (0: none yet)
 * and its bias less the vDSO's start. */
volatile __u32 vdso_table = 0;
volatile __u64 vdso_bias_from_start = 0;

/* Every array user space fills is BPF_F_MMAPABLE: written in place, no system call per entry.
 * row_shards' entries are made by the loader, of EHELF_SHARD_ROWS rows each; this template,
 * which libbpf makes at load and drops, is one row: BPF_F_INNER_MAP lets the entries' sizes
 * differ from it (made as large, it cost every run's start-up 16 MiB zeroed, ~4 ms). */
struct inner_rows {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP);
  __uint(max_entries, 1);
  /* Sizes, not types: clang 14 leaves an inner map's value struct a forward declaration in BTF,
   * which libbpf 1.1 cannot size. */
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(struct ehelf_bpf_row));
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, EHELF_MAX_SHARDS);
  __type(key, __u32);
  __array(values, struct inner_rows);
} row_shards SEC(".maps");

/* The first shard, which every run needs, a map of its own rather than row_shards' entry 0: a
 * map-in-map's update waits for an RCU grace period (~12 ms of every run's start-up here), and a
 * lookup in a map the program names is one the verifier inlines. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, EHELF_SHARD_ROWS);
  __type(key, __u32);
  __type(value, struct ehelf_bpf_row);
} rows0 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, EHELF_MAX_TABLES);
  __type(key, __u32);
  __type(value, struct ehelf_table);
} tables SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, EHELF_MAX_MAPPINGS);
  __type(key, __u32);
  __type(value, struct ehelf_mapping);
} mappings SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, EHELF_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct ehelf_process);
} processes SEC(".maps");

/* The programs processes ran before, for their samples that waited (bpf_maps.h:
 * ehelf_past_programs); only the replay reads it. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct ehelf_past_programs);
} past_programs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, EHELF_MAX_TABLES);
  __type(key, struct ehelf_file_key);
  __type(value, struct ehelf_file);
} files SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct ehelf_learned);
} learned SEC(".maps");

/* A walk in progress, per CPU: the sample's (scratch) and a parked sample's (replay_scratch).
 * (Write-only through ehelf's descriptor, as every map that holds bytes of the sampled stacks:
 * its window; bpf_maps.h, ehelf_parked.) */
struct walk_scratch {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(map_flags, BPF_F_WRONLY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ehelf_walk);
};
struct walk_scratch scratch SEC(".maps");

/* Rows by (table, pc looked up), per CPU, direct-mapped: a sample's return addresses are mostly
 * those of the samples before it, and a hit is one lookup where the page index and the binary
 * search read about six rows. CPU c's entries are [c << EHELF_ROW_CACHE_BITS, + 2^12): a plain
 * array the loader sizes for the possible CPUs (as a per-CPU array, each of its 4,096 entries was
 * an allocation of its own, ~9 ms of every run's start-up). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1u << EHELF_ROW_CACHE_BITS); /* times the CPUs: set by the loader */
  __type(key, __u32);
  __type(value, struct ehelf_row_cache_entry);
} row_cache SEC(".maps");

/* This CPU's entry `slot` of the row cache. */
static __always_inline struct ehelf_row_cache_entry *row_cache_entry(__u32 slot) {
  const __u32 index = (bpf_get_smp_processor_id() << EHELF_ROW_CACHE_BITS) | slot;
  return bpf_map_lookup_elem(&row_cache, &index);
}

/* Each CPU's last walk, frame by frame (bpf_maps.h: ehelf_memo_frame), in two buffers: a walk
 * that takes frames from the one holding it writes its own into the other. CPU c's buffer b is
 * entries [(2c + b) << EHELF_MAX_FRAMES_SHIFT, + EHELF_MAX_FRAMES): a plain array the loader
 * sizes for the possible CPUs, as the row cache. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2 * EHELF_MAX_FRAMES); /* times the CPUs: set by the loader */
  __type(key, __u32);
  __type(value, struct ehelf_memo_frame);
} walk_memo SEC(".maps");

/* Frame `frame` of this CPU's memo buffer `buffer`. */
static __always_inline struct ehelf_memo_frame *memo_at(__u32 buffer, __u32 frame) {
  const __u32 index = ((bpf_get_smp_processor_id() * 2 + (buffer & 1)) << EHELF_MAX_FRAMES_SHIFT) |
                      (frame & (EHELF_MAX_FRAMES - 1));
  return bpf_map_lookup_elem(&walk_memo, &index);
}

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, EHELF_MAX_STACK_CHUNKS);
  __type(key, struct ehelf_stack_key);
  __type(value, struct ehelf_stack_chunk);
} stacks SEC(".maps");

struct counts_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, EHELF_MAX_COUNTS);
  __type(key, struct ehelf_count_key);
  __type(value, struct ehelf_count);
};
struct counts_map counts0 SEC(".maps");
struct counts_map counts1 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_STACK_TRACE);
  __uint(max_entries, EHELF_MAX_KERNEL_STACKS);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, EHELF_KERNEL_FRAMES * sizeof(__u64));
} kernel_stack_traces SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, EHELF_STAT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} requests SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4 * 1024 * 1024);
} copies SEC(".maps");

/* Each process's address space, and since when the program has sampled it (struct
 * ehelf_space), so that user space names a stack with the mappings of its program, not of one it
 * exec'd since. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192); /* (an entry evicted is made again: still after its exec) */
  __type(key, __u32);
  __type(value, struct ehelf_space);
} spaces SEC(".maps");

/* When each process last sent a request: at most one every 20 ms, so that a busy process
 * without a table sends a few, not thousands. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, __u64);
} asked SEC(".maps");

/* Samples waiting for their tables (bpf_maps.h: ehelf_parked), oldest first. */
struct {
  __uint(type, BPF_MAP_TYPE_QUEUE);
  __uint(map_flags, BPF_F_WRONLY);
  __uint(max_entries, EHELF_PARK_ENTRIES);
  __type(value, struct ehelf_parked);
} parked SEC(".maps");

/* How many samples of each process wait in `parked`: user space keeps a process that exited
 * while some of its samples wait (their walks need its mappings). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, __u32);
} parked_by_process SEC(".maps");

/* One more (or, `delta` -1, one less) sample of `tgid` waiting. */
static void count_parked(__u32 tgid, int delta) {
  __u32 *n = bpf_map_lookup_elem(&parked_by_process, &tgid);
  if (n) {
    if (delta < 0 && *n <= 1)
      bpf_map_delete_elem(&parked_by_process, &tgid);
    else
      __sync_fetch_and_add(n, delta);
  } else if (delta > 0) {
    __u32 one = 1;
    bpf_map_update_elem(&parked_by_process, &tgid, &one, BPF_NOEXIST);
  }
}

/* Where a sample is made ready to park, and where ehelf_replay takes one out, and its walk: apart
 * from the sampling program's (scratch), which a sample may run in the middle of a replay on the
 * same CPU. */
struct parked_scratch {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(map_flags, BPF_F_WRONLY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ehelf_parked);
};
struct parked_scratch park_scratch SEC(".maps");
struct parked_scratch replay_parked SEC(".maps");
struct walk_scratch replay_scratch SEC(".maps");

/* Which walk a bpf_loop callback works on: the sample's (scratch) or a parked one's. */
struct loop_ctx {
  __u32 replaying;
};
static __always_inline struct ehelf_walk *walk_of(const struct loop_ctx *c) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(c && c->replaying ? (void *)&replay_scratch : (void *)&scratch, &zero);
}

static const struct ehelf_bpf_row *row_at(__u64 index) {
  __u32 shard = (__u32)(index >> EHELF_SHARD_BITS);
  __u32 slot = (__u32)(index & (EHELF_SHARD_ROWS - 1));
  if (shard == 0) return bpf_map_lookup_elem(&rows0, &slot);
  void *rows = bpf_map_lookup_elem(&row_shards, &shard);
  if (!rows) return 0;
  return bpf_map_lookup_elem(rows, &slot);
}

/* A binary search's state, for bpf_loop's callbacks (search_round, mapping_round). */
struct search_state {
  __u64 first;
  __u32 key, lo, hi;
  int result;
};

/* bpf_loop's callback: one round of a row search. */
static long search_round(__u32 index, void *state) {
  struct search_state *s = state;
  s->result = ehelf_bpf_search_round(0, s->first, s->key, &s->lo, &s->hi);
  return s->result != 0;
}

/* The row search's rounds (bpf_walk.h: EHELF_SEARCH_ROUNDS), each a call of bpf_loop's callback.
 * Verifier: a callback is checked once, for any round; the 32 rounds of a loop were checked one
 * by one (with the page index's reads, 5,400 instructions processed at each load). Only a row
 * the row cache misses is searched. */
static int search_rounds(__u64 first, __u32 rel, __u32 *lo, __u32 *hi) {
  struct search_state s = {.first = first, .key = rel, .lo = *lo, .hi = *hi};
  bpf_loop(32, search_round, &s, 0);
  *lo = s.lo;
  *hi = s.hi;
  return s.result < 0 ? -1 : 0;
}

static void count_stat(__u32 index) {
  __u64 *n = bpf_map_lookup_elem(&stats, &index);
  if (n) *n += 1; /* per CPU: no other writer */
}

/* Verifier: a global function, checked once (as a static one, at each of its five call sites
 * with each state that reached it). */
__attribute__((noinline)) int request(__u32 tgid, __u64 pc, __u32 reason) {
  __u64 now = bpf_ktime_get_ns();
  __u64 *last = bpf_map_lookup_elem(&asked, &tgid);
  if (last && now - *last < 20000000ull) return 0; /* asked less than 20 ms ago */
  bpf_map_update_elem(&asked, &tgid, &now, BPF_ANY);
  struct ehelf_request r = {.tgid = tgid, .reason = reason, .pc = pc};
  if (bpf_ringbuf_output(&requests, &r, sizeof(r), 0)) count_stat(EHELF_STAT_REQUESTS_LOST);
  return 0;
}

/* The 8 bytes of the sampled thread's memory at `addr` (0: read), through the walk's window: a
 * word outside it fills it from up to EHELF_WINDOW_BELOW bytes below the word to at most the end
 * of the word's page (the read touches no page the word's own read would not), and a word not
 * 8-aligned, or one whose window cannot be read, is read alone. (Below: a step reads the return
 * address at CFA - 8 first, then the saved rbp and rbx under it; a window starting at the return
 * address made each of those a second bpf_probe_read_user.) */
#define EHELF_WINDOW_BELOW 128
/* The word at `addr` read (from a new window when it is 8-aligned) into w->word: 0, or the error.
 * Verifier: a global function, checked once on its own (as a static one it was checked again at
 * each of its call sites for each state the walk's loop reached it with). */
__attribute__((noinline)) int refill_window(struct ehelf_walk *w, __u64 addr) {
  if (!w) return -1;
  struct ehelf_stack_window *win = &w->window;
  w->stack_reads += 1;
  if (w->replaying) { /* the parked copy, read a word at a time (the window stays empty) */
    __u32 zero = 0;
    const struct ehelf_parked *p = bpf_map_lookup_elem(&replay_parked, &zero);
    if (!p || addr < p->regs.rsp || addr - p->regs.rsp + 8 > p->length) return -14; /* EFAULT */
    const __u64 offset = (addr - p->regs.rsp) & (EHELF_PARK_BYTES - 1);
    return bpf_probe_read_kernel(&w->word, 8, &p->bytes[offset]);
  }
  if (addr & 7) return bpf_probe_read_user(&w->word, 8, (const void *)addr);
  __u64 below = addr & 4095; /* 8-aligned, as addr */
  if (below > EHELF_WINDOW_BELOW) below = EHELF_WINDOW_BELOW;
  const __u64 start = addr - below;
  __u64 length = 4096 - (start & 4095);
  if (length > EHELF_WINDOW_BYTES) length = EHELF_WINDOW_BYTES;
  /* The verifier's view of the length: at least 8, at most the window. */
  length &= EHELF_WINDOW_BYTES * 2 - 8;
  if (length < below + 8 || length > EHELF_WINDOW_BYTES ||
      bpf_probe_read_user(win->bytes, (__u32)length, (const void *)start)) {
    win->length = 0;
    w->stack_reads += 1;
    return bpf_probe_read_user(&w->word, 8, (const void *)addr);
  }
  win->base = start;
  win->length = (__u32)length;
  /* In bounds for the verifier: an 8-aligned offset below the window's end. */
  w->word = *(const __u64 *)&win->bytes[below & (EHELF_WINDOW_BYTES - 8)];
  return 0;
}

/* (Inlined: the window's hit is most reads, and a call costs a return, which the kernel's
 * mitigations (retpolines, SRSO's safe RET) make a mispredicted one: ~5 ns.) */
static __always_inline int read_user(struct ehelf_walk *w, __u64 addr, __u64 *out) {
  const struct ehelf_stack_window *win = &w->window;
  const __u64 offset = addr - win->base;
  if ((addr & 7) || addr < win->base || offset + 8 > win->length) {
    const int error = refill_window(w, addr);
    *out = w->word;
    return error;
  }
  /* In bounds for the verifier: an 8-aligned offset below the window's end. */
  *out = *(const __u64 *)&win->bytes[offset & (EHELF_WINDOW_BYTES - 8)];
  return 0;
}

/* bpf_loop's callback: one round of search_mapping's binary search (key: the index in `mappings`
 * of the process's first mapping). */
static long mapping_round(__u32 index, void *state) {
  struct search_state *s = state;
  if (s->lo >= s->hi) return 1;
  const __u32 mid = s->lo + (s->hi - s->lo) / 2;
  const __u32 at = s->key + mid;
  const struct ehelf_mapping *m = bpf_map_lookup_elem(&mappings, &at);
  if (!m) {
    s->result = -1;
    return 1;
  }
  if (m->start <= s->first)
    s->lo = mid + 1;
  else
    s->hi = mid;
  return 0;
}

/* The index in `mappings` of the walk's process's mapping holding `pc`, or -1: a binary search of
 * at most 32 rounds, each a call of bpf_loop's callback.
 * Verifier: a global function (as refill_window); its rounds a callback, checked once (a loop's
 * were checked one by one: 3,600 instructions processed at each load). */
__attribute__((noinline)) __s64 search_mapping(struct ehelf_walk *w, __u64 pc) {
  if (!w) return -1;
  struct search_state s = {.first = pc, .key = w->first_mapping, .lo = 0, .hi = w->mapping_count};
  bpf_loop(32, mapping_round, &s, 0);
  if (s.result < 0 || s.lo == 0) return -1;
  const __u32 index = w->first_mapping + s.lo - 1;
  const struct ehelf_mapping *m = bpf_map_lookup_elem(&mappings, &index);
  if (!m || pc >= m->end) return -1;
  w->last_mapping = index;
  return index;
}

/* The mapping of the walk's process holding `pc`, or 0: the last one found when it holds it
 * (callers are mostly in the callee's file), else the search. */
static __always_inline const struct ehelf_mapping *find_mapping(struct ehelf_walk *w, __u64 pc) {
  const __u32 index = w->last_mapping;
  const struct ehelf_mapping *m = bpf_map_lookup_elem(&mappings, &index);
  if (m && index - w->first_mapping < w->mapping_count && m->start <= pc && pc < m->end) return m;
  const __s64 found = search_mapping(w, pc);
  if (found < 0) return 0;
  const __u32 at = (__u32)found;
  return bpf_map_lookup_elem(&mappings, &at);
}

/* Only the fields read here, placed by the running kernel's BTF (CO-RE). */
struct super_block___ehelf {
  __u32 s_dev;
} __attribute__((preserve_access_index));
struct inode___ehelf {
  struct super_block___ehelf *i_sb;
  unsigned long i_ino;
  long long i_size;
  long long i_mtime_sec; /* (since 6.11; before, the file is not found this way) */
  __u32 i_mtime_nsec;
} __attribute__((preserve_access_index));
struct file___ehelf {
  struct inode___ehelf *f_inode;
} __attribute__((preserve_access_index));
struct vm_area_struct___ehelf {
  unsigned long vm_start;
  unsigned long vm_end;
  unsigned long vm_flags;
  unsigned long vm_pgoff;
  struct file___ehelf *vm_file;
} __attribute__((preserve_access_index));
struct mm_struct___ehelf {
  struct file___ehelf *exe_file;
  unsigned long start_code;
  unsigned long end_code;
  unsigned long start_stack;
  unsigned long saved_auxv[2]; /* (the kernel's size: bpf_core_field_size) */
  struct {
    void *vdso;
  } context;
} __attribute__((preserve_access_index));
struct task_struct___ehelf {
  struct mm_struct___ehelf *mm;
  struct task_struct___ehelf *real_parent;
  int tgid;
} __attribute__((preserve_access_index));

/* Whether the current thread runs in its parent's address space (1): a vfork or posix_spawn
 * child until its exec replaces it (ehelf_copy.parents_space). */
static __u32 in_parents_space(void) {
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  struct mm_struct___ehelf *mm = BPF_CORE_READ(task, mm);
  return mm && mm == BPF_CORE_READ(task, real_parent, mm);
}

#define EHELF_VM_EXEC 0x4 /* include/linux/mm.h */

/* The identity of `file` as user space keys its tables (1), or 0: no file, or a kernel before
 * 6.11 (whose inodes keep their mtime otherwise: not found this way). */
static int file_key(struct file___ehelf *file, struct ehelf_file_key *key) {
  if (!file || !bpf_core_field_exists(struct inode___ehelf, i_mtime_sec)) return 0;
  struct inode___ehelf *inode = BPF_CORE_READ(file, f_inode);
  key->ino = BPF_CORE_READ(inode, i_ino);
  key->size = (__u64)BPF_CORE_READ(inode, i_size);
  key->mtime_sec = BPF_CORE_READ(inode, i_mtime_sec);
  key->mtime_nsec = BPF_CORE_READ(inode, i_mtime_nsec);
  key->dev = BPF_CORE_READ(inode, i_sb, s_dev);
  return 1;
}

/* What bpf_find_vma's callback saw of the pc's mapping. */
struct vma_seen {
  __u64 start, end, offset, vdso;
  struct ehelf_file_key key;
  __u32 has_file, exec;
};

static long see_vma(void *task, void *vma, void *ctx) {
  struct vma_seen *seen = ctx;
  struct vm_area_struct___ehelf *v = vma;
  struct file___ehelf *file = BPF_CORE_READ(v, vm_file);
  seen->start = BPF_CORE_READ(v, vm_start);
  seen->end = BPF_CORE_READ(v, vm_end);
  seen->offset = BPF_CORE_READ(v, vm_pgoff) << 12;
  seen->exec = (BPF_CORE_READ(v, vm_flags) & EHELF_VM_EXEC) != 0;
  seen->vdso = (__u64)BPF_CORE_READ((struct task_struct___ehelf *)task, mm, context.vdso);
  seen->has_file = file_key(file, &seen->key);
  return 0;
}

/* The sampled thread's address space: a new one after each exec. */
static __u64 current_address_space(void) {
  /* A direct load (the task is a BTF pointer), not a bpf_probe_read_kernel call. */
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  return (__u64)task->mm;
}

/* The walk's learned mapping holding `pc`, or 0. */
static const struct ehelf_mapping *learned_mapping(struct ehelf_walk *w, __u64 pc) {
  for (int i = 0; i < EHELF_FOUND_MAPPINGS; i++) {
    if ((__u32)i >= w->learned.count) break;
    const struct ehelf_mapping *m = &w->learned.found[i];
    if (m->start <= pc && pc < m->end) return m;
  }
  return 0;
}

/* A slot of w->learned, the oldest when it is full. */
static __u32 learned_slot(struct ehelf_walk *w) {
  __u32 slot = w->learned.count;
  if (slot >= EHELF_FOUND_MAPPINGS) {
    slot = w->learned.next % EHELF_FOUND_MAPPINGS;
    w->learned.next += 1;
  } else {
    w->learned.count += 1;
  }
  w->learned_added = 1;
  return slot & (EHELF_FOUND_MAPPINGS - 1);
}

/* For a process user space has not read: when `pc` is in its program's code, the slot of
 * w->learned that now maps it, else -1. The kernel says where the program's code is without the
 * mmap lock (mm's start_code and end_code: its executable segments' span, at its load bias;
 * exe_file: the file), so this costs no bpf_find_vma, of which a sample has one: a new process's
 * walk from its program into libc and back finds both. */
static int learn_executable(struct ehelf_walk *w, __u64 pc) {
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  const __u64 start = BPF_CORE_READ(task, mm, start_code);
  const __u64 end = BPF_CORE_READ(task, mm, end_code);
  if (pc < start || pc >= end) return -1;
  struct ehelf_file_key key = {};
  if (!file_key(BPF_CORE_READ(task, mm, exe_file), &key)) return -1;
  const struct ehelf_file *f = bpf_map_lookup_elem(&files, &key);
  if (!f || f->segment_count == 0) return -1; /* (bpf_find_vma then says what it is) */
  /* start_code is the lowest executable segment's address plus the load bias. */
  __u64 lowest = f->segments[0].vaddr;
  if (f->segment_count > 1 && f->segments[1].vaddr < lowest) lowest = f->segments[1].vaddr;
  const __u32 slot = learned_slot(w);
  struct ehelf_mapping *m = &w->learned.found[slot];
  m->start = start;
  m->end = end;
  m->bias = start - lowest;
  m->table = f->table;
  m->kind = f->kind;
  count_stat(EHELF_STAT_VMA_FILES);
  return (int)slot;
}

/* The sampled process's interpreter's base address (its aux vector's AT_BASE), or 0. */
static __u64 interpreter_base(struct ehelf_walk *w) {
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  struct mm_struct___ehelf *mm = BPF_CORE_READ(task, mm);
  if (!mm) return 0;
  __u32 size = bpf_core_field_size(struct mm_struct___ehelf, saved_auxv);
  if (size > sizeof(w->auxv)) size = sizeof(w->auxv);
  if (size < 16) return 0;
  const __u64 offset = bpf_core_field_offset(struct mm_struct___ehelf, saved_auxv);
  if (bpf_probe_read_kernel(w->auxv, size, (const char *)mm + offset)) return 0;
  for (int i = 0; i < EHELF_AUXV_WORDS / 2; i++) {
    if ((__u32)(2 * i + 2) * 8 > size) break;
    const __u64 type = w->auxv[2 * i];
    if (type == 0) break;                      /* AT_NULL */
    if (type == 7) return w->auxv[2 * i + 1]; /* AT_BASE */
  }
  return 0;
}

/* For a process user space has not read: when `pc` is in the interpreter's code, the slot of
 * w->learned that now maps it, else -1. A new process runs ld.so for its first milliseconds,
 * mapping its libraries: the one bpf_find_vma a sample may make then mostly finds the mmap lock
 * taken (by the sampled thread itself, in mmap). The kernel says where it put the interpreter
 * (AT_BASE) without that lock; that it is the one user space published (a program may name
 * another) is checked by its build ID, read where the process has it. */
static int learn_interpreter(struct ehelf_walk *w, __u64 pc) {
  if (interpreter.id_size == 0) return -1;
  struct ehelf_file_key key = interpreter.key;
  const struct ehelf_file *f = bpf_map_lookup_elem(&files, &key);
  if (!f) return -1;
  const __u64 base = interpreter_base(w);
  if (base == 0) return -1;
  for (int i = 0; i < EHELF_FILE_SEGMENTS; i++) {
    if ((__u32)i >= f->segment_count) break;
    const struct ehelf_file_segment *seg = &f->segments[i];
    const __u64 start = base + seg->vaddr;
    if (pc < start || pc >= start + seg->filesz) continue;
    __u64 id[3] = {};
    __u32 n = interpreter.id_size;
    if (n > sizeof(id)) n = sizeof(id);
    if (n == 0 || bpf_probe_read_user(id, n, (const void *)(base + interpreter.id_vaddr)) ||
        id[0] != interpreter.id[0] || id[1] != interpreter.id[1] || id[2] != interpreter.id[2])
      return -1;
    const __u32 slot = learned_slot(w);
    struct ehelf_mapping *m = &w->learned.found[slot];
    m->start = start;
    m->end = start + seg->filesz;
    m->bias = base;
    m->table = f->table;
    m->kind = f->kind;
    count_stat(EHELF_STAT_INTERPRETER);
    return (int)slot;
  }
  return -1;
}

/* The index in w->learned of the mapping holding `pc` as the kernel has it, for a pc in none of
 * those user space wrote (a process that exec'd since, a library dlopen'd since): its file's
 * table when user space published one for that inode (the tables are per file: a new process
 * of a known program, or a library another process loaded, walks from its first sample), else a
 * mapping of kind NO_FILE or UNKNOWN_FILE; -1 when no executable mapping holds it, or when this
 * sample has asked the kernel already (EHELF_FOUND_MAPPINGS). What is found is kept for the
 * process's next samples.
 * Verifier: a global function, checked once on its own; inlined at its two call sites, it made
 * the verifier's walk of the program ten times longer (50 -> 440 ms to load). */
__attribute__((noinline)) int learned_index(struct ehelf_walk *w, __u64 pc) {
  if (!w) return -1;
  const struct ehelf_mapping *known = learned_mapping(w, pc);
  if (known) return (int)(known - w->learned.found);
  if (!w->learned_read) {
    w->learned_read = 1;
    const __u64 space = w->space;
    const struct ehelf_learned *l = bpf_map_lookup_elem(&learned, &w->tgid);
    if (l && l->address_space == space) {
      w->learned = *l;
      known = learned_mapping(w, pc);
      if (known) return (int)(known - w->learned.found);
    } else {
      w->learned.address_space = space;
    }
  }
  if (w->replaying) { /* the sampled task is not the current one: nothing more to learn */
    w->vma_deferred = 1;
    return -1;
  }
  if (!w->known_process) {
    int slot = learn_executable(w, pc);
    if (slot < 0) slot = learn_interpreter(w, pc);
    if (slot >= 0) return slot;
  }
  if (w->vma_asked) {
    w->vma_deferred = 1;
    return -1;
  }
  w->vma_asked = 1;
  struct vma_seen seen = {};
  if (bpf_find_vma(bpf_get_current_task_btf(), pc, see_vma, &seen, 0) != 0 || !seen.exec ||
      pc < seen.start || pc >= seen.end)
    return -1; /* (also when the mmap lock was taken: -EBUSY) */
  const __u32 slot = learned_slot(w);
  struct ehelf_mapping *m = &w->learned.found[slot];
  m->start = seen.start;
  m->end = seen.end;
  m->bias = 0;
  m->table = 0;
  m->kind = EHELF_MAPPING_UNKNOWN_FILE;
  if (!seen.has_file) {
    if (vdso_table != 0 && seen.start == seen.vdso) {
      m->kind = EHELF_MAPPING_TABLE;
      m->table = vdso_table;
      m->bias = seen.start + vdso_bias_from_start;
    } else {
      m->kind = EHELF_MAPPING_NO_FILE;
    }
    return (int)slot;
  }
  const struct ehelf_file *f = bpf_map_lookup_elem(&files, &seen.key);
  if (!f) {
    count_stat(EHELF_STAT_VMA_UNKNOWN);
    return (int)slot;
  }
  for (int i = 0; i < EHELF_FILE_SEGMENTS; i++) {
    const struct ehelf_file_segment *s = &f->segments[i];
    if ((__u32)i >= f->segment_count) break;
    if (seen.offset >= s->offset && seen.offset < s->offset + (s->filesz ? s->filesz : 1)) {
      m->bias = seen.start - (s->vaddr + (seen.offset - s->offset));
      m->table = f->table;
      m->kind = f->kind;
      count_stat(EHELF_STAT_VMA_FILES);
      break;
    }
  }
  return (int)slot;
}



/* Whether `pc` is in a file's mapping (one written by user space, or one the kernel found). */
static int in_file(struct ehelf_walk *w, __u64 pc) {
  if (find_mapping(w, pc)) return 1;
  const int found = learned_index(w, pc);
  return found >= 0 &&
         w->learned.found[found & (EHELF_FOUND_MAPPINGS - 1)].kind != EHELF_MAPPING_NO_FILE;
}

/* The frame-pointer rule (runtime/unwind_rule.hpp: kFramePointerRule), for code without tables. */
static const struct ehelf_bpf_row frame_pointer_row = {
    .kind = EHELF_ROW_CFA_RBP,
    .flags = EHELF_SAVE_AT_CFA,
    .rip_offset = -8,
    .cfa_offset = 16,
    .rbp_offset = -16,
};

/* Follows rbp as GeneralStep does outside tables: only when it gives a return address. */
__attribute__((noinline)) int frame_pointer_step(struct ehelf_walk *w, struct ehelf_bpf_regs *r) {
  if (!w || !r) return -1;
  struct ehelf_bpf_regs caller = *r;
  if (ehelf_bpf_step(&frame_pointer_row, &caller, w) != EHELF_STOP_OK || caller.rip == 0)
    return -1;
  *r = caller;
  return 0;
}

/* The row cache's slot for the pc `rel` of table `id`. */
static __always_inline __u32 row_cache_slot(__u32 id, __u32 rel) {
  return (rel * 0x9e3779b1u ^ id * 0x85ebca6bu) >> (32 - EHELF_ROW_CACHE_BITS);
}

/* The step through a signal frame (bpf_walk.h: ehelf_bpf_signal_step).
 * Verifier: a global function, checked once on its own; inlined, its four reads of the stack
 * (each the window's check and refill) were followed with each of the frame's paths. Signal
 * frames are rare: a call costs nothing that shows. */
__attribute__((noinline)) int signal_step(const struct ehelf_bpf_row *row, struct ehelf_bpf_regs *r,
                                          struct ehelf_walk *w) {
  if (!row || !r || !w) return EHELF_STOP_BAD_READ;
  return ehelf_bpf_signal_step(row, r, w);
}

/* The row of table `id` covering `rel` (relative to the table's base) into w->row, or a stop:
 * the search of a row not in the row cache, which it fills.
 * Verifier: a global function, checked once on its own (inlined in the walk, the searches' loops
 * made the program ten times longer to load). */
__attribute__((noinline)) int search_table(struct ehelf_walk *w, __u32 id, __u32 rel) {
  if (!w) return EHELF_STOP_NO_TABLE_YET;
  const struct ehelf_table *t = bpf_map_lookup_elem(&tables, &id);
  if (!t || t->rows.row_count == 0) return EHELF_STOP_NO_TABLE_YET;
  if (!w->replaying) count_stat(EHELF_STAT_ROW_MISSES); /* (the cache's misses only) */
  const __s64 index = ehelf_bpf_find_row(0, &t->rows, rel);
  if (index < 0) return EHELF_STOP_NO_ENTRY;
  const struct ehelf_bpf_row *found = row_at((__u64)index);
  if (!found) return EHELF_STOP_ROW_MISSING;
  w->row = *found;
  if (w->replaying) return EHELF_STOP_OK; /* (a sample on this CPU may be writing the cache) */
  __u32 slot = row_cache_slot(id, rel);
  struct ehelf_row_cache_entry *cached = row_cache_entry(slot);
  if (cached) {
    cached->table = id;
    cached->rel = rel;
    cached->generation = table_generation;
    cached->row = w->row;
  }
  return EHELF_STOP_OK;
}

/* The row for `lookup` in table `id` mapped with `bias` into w->row, or a stop: from the row
 * cache (most frames; inlined: no call), else found by search_table. */
static __always_inline int find_row(struct ehelf_walk *w, __u32 id, __u64 bias, __u64 lookup) {
  const struct ehelf_table *t = bpf_map_lookup_elem(&tables, &id);
  if (!t || t->rows.row_count == 0) return EHELF_STOP_NO_TABLE_YET;
  const __u64 rel = lookup - bias - t->base;
  if (lookup < bias + t->base || rel > 0xffffffffull) return EHELF_STOP_NO_ENTRY;
  __u32 slot = row_cache_slot(id, (__u32)rel);
  const struct ehelf_row_cache_entry *cached = w->replaying ? 0 : row_cache_entry(slot);
  if (cached && cached->table == id && cached->rel == (__u32)rel &&
      cached->generation == table_generation) {
    w->row = cached->row;
  } else {
    const int stop = search_table(w, id, (__u32)rel);
    if (stop != EHELF_STOP_OK) return stop;
  }
  return w->row.kind == EHELF_ROW_NONE ? EHELF_STOP_NO_ENTRY : EHELF_STOP_OK;
}

/* find_row for the rare second lookup of a frame (its pc itself).
 * Verifier: a global function, checked once; a second inlined find_row was followed with each of
 * the frame's paths. */
__attribute__((noinline)) int find_row_again(struct ehelf_walk *w, __u32 id, __u64 bias,
                                             __u64 lookup) {
  if (!w) return EHELF_STOP_NO_TABLE_YET;
  return find_row(w, id, bias, lookup);
}

/* One step of the walk through table `id` mapped with `bias` (its row looked up at pc - 1 unless
 * the pc is exact), or a stop. */
static __always_inline int table_step(struct ehelf_walk *w, __u32 id, __u64 bias, __u64 pc,
                                      __u8 interrupted) {
  int stop = find_row(w, id, bias, interrupted ? pc : pc - 1);
  /* A return address at a function's entry (makecontext's __start_context): looked up as is,
   * as gdb and GeneralStep do. */
  if (stop == EHELF_STOP_NO_ENTRY && !interrupted) stop = find_row_again(w, id, bias, pc);
  if (stop != EHELF_STOP_OK) return stop;
  if (w->row.kind == EHELF_ROW_STOP) {
    const __u32 reason = (__u32)w->row.cfa_offset;
    if (reason < EHELF_NOT_EXPRESSIBLE_KINDS) count_stat(EHELF_STAT_NOT_EXPRESSIBLE + reason);
  }
  w->signal = w->row.kind == EHELF_ROW_SIGNAL || (w->row.flags & EHELF_ROW_SIGNAL_FRAME);
  return ehelf_bpf_step(&w->row, &w->regs, w);
}

/* The step where no row applies: the pc in no file's mapping, in a file walked by frame
 * pointers, in no entry of its file's table (kind TABLE), or in a mapping of a kind this program
 * does not know.
 * Verifier: a global function, checked once on its own, not with each state of the walk's loop
 * (bpf_loop's callback is checked until its states repeat). */
__attribute__((noinline)) int step_without_row(struct ehelf_walk *w, __u64 pc, __u32 kind) {
  if (!w) return EHELF_STOP_NO_MAPPING;
  int stop;
  if (kind == EHELF_MAPPING_NO_FILE || kind == EHELF_MAPPING_UNKNOWN_FILE) {
    /* Code in no mapping of a file: JIT code keeping frame pointers, as GeneralStep walks it. */
    stop = frame_pointer_step(w, &w->regs) == 0 ? EHELF_STOP_OK : EHELF_STOP_NO_MAPPING;
    w->copy.outside += 1;
    /* Or code mapped since user space read the process's mappings (dlopen): it reads them
     * again. */
    if (stop == EHELF_STOP_NO_MAPPING) request(w->tgid, pc, EHELF_STOP_NO_MAPPING);
  } else if (kind == EHELF_MAPPING_FRAME_POINTER) {
    stop = frame_pointer_step(w, &w->regs) == 0 ? EHELF_STOP_OK : EHELF_STOP_NO_ENTRY;
  } else if (kind == EHELF_MAPPING_TABLE) {
    /* Code without an entry in a file with tables (crt's, hand-written): rbp is followed when
     * it leads into a mapping, as GeneralStep does. */
    stop = EHELF_STOP_NO_ENTRY;
    struct ehelf_bpf_regs caller = w->regs;
    w->vma_deferred = 0;
    if (frame_pointer_step(w, &caller) == 0) {
      if (in_file(w, caller.rip - 1)) {
        w->regs = caller;
        w->signal = 0;
        stop = EHELF_STOP_OK;
      } else if (w->vma_deferred && !w->known_process) {
        /* (whether rbp leads into a file of a process not read yet: the next sample asks) */
        stop = EHELF_STOP_NO_PROCESS;
      }
    }
  } else { /* a kind this program does not know: user space reads the process again */
    stop = EHELF_STOP_NO_TABLE_YET;
    request(w->tgid, pc, EHELF_STOP_NO_TABLE_YET);
  }
  return stop;
}

/* One frame: records the pc, then steps to the caller. 0: go on; 1: the walk ended. */
static __always_inline long walk_one(struct ehelf_walk *w) {
  __u64 pc = w->regs.rip;
  if (pc == 0) {
    w->stop = EHELF_STOP_END;
    return 1;
  }
  /* The frame in this walk's memo (the buffer the CPU's last walk is not in). (Looked up again
   * after the step: a pointer kept through the frame, null or not, doubled the states the
   * verifier follows.) */
  if (!w->replaying) {
    struct ehelf_memo_frame *memo = memo_at(w->memo.buffer ^ 1, w->depth);
    if (memo) {
      memo->regs = w->regs;
      memo->flags = 0;
    }
  }
  w->copy.stack.pcs[w->depth & (EHELF_MAX_FRAMES - 1)] = pc;
  w->depth += 1;
  w->hash = (w->hash ^ pc) * 0x100000001b3ull + (w->hash >> 29);
  if (w->depth >= max_depth || w->depth >= EHELF_MAX_FRAMES) {
    w->stop = EHELF_STOP_DEPTH;
    return 1;
  }
  const __u64 sp = w->regs.rsp;
  const __u8 interrupted = w->regs.exact_pc;
  int stop;
  w->signal = 0;
  /* The pc's mapping, as scalars: one written by user space or one the kernel found (two kinds
   * of pointer, which the verifier would follow apart through the rest of the frame). */
  __u32 kind = EHELF_MAPPING_NO_FILE, table = 0;
  __u64 bias = 0;
  const struct ehelf_mapping *known = find_mapping(w, pc);
  w->mapping_written = known != 0;
  if (known) {
    kind = known->kind;
    table = known->table;
    bias = known->bias;
  } else {
    const int found = learned_index(w, pc);
    if (found >= 0) {
      const struct ehelf_mapping *f = &w->learned.found[found & (EHELF_FOUND_MAPPINGS - 1)];
      kind = f->kind;
      table = f->table;
      bias = f->bias;
    } else if (w->vma_deferred && !w->known_process) {
      /* A process user space has not read, in a file the sample could not ask the kernel
       * about: the next sample will. */
      w->stop = EHELF_STOP_NO_PROCESS;
      return 1;
    }
  }
  if (kind == EHELF_MAPPING_UNKNOWN_FILE) {
    /* A file user space has not read yet: a library mapped since it read the process's
     * mappings, which it reads again; in a process it has not read, the walk waits for that. */
    request(w->tgid, pc, EHELF_STOP_NO_MAPPING);
    if (!w->known_process) {
      w->stop = EHELF_STOP_NO_PROCESS;
      return 1;
    }
  }
  const int mapped = kind != EHELF_MAPPING_NO_FILE && kind != EHELF_MAPPING_UNKNOWN_FILE;
  stop = EHELF_STOP_NO_ENTRY;
  if (kind == EHELF_MAPPING_TABLE) {
    stop = table_step(w, table, bias, pc, interrupted);
    /* A step through a row of a mapping user space wrote: one the memo may take again (a step
     * after which the walk stops below is the memo's last frame's: never taken). (Kept here, not
     * after the checks below: a flag live through them doubled the states the verifier follows.) */
    if (stop == EHELF_STOP_OK && w->mapping_written && !w->replaying) {
      struct ehelf_memo_frame *memo = memo_at(w->memo.buffer ^ 1, w->depth - 1);
      if (memo) ehelf_bpf_memo_record(memo, &w->row, &w->regs);
    }
  }
  if (stop == EHELF_STOP_NO_ENTRY) stop = step_without_row(w, pc, kind);
  if (stop == EHELF_STOP_OK && w->regs.rip == 0) stop = EHELF_STOP_END;
  /* The stack grows down: a caller's frame is above (signal frames may switch stacks). Where rbp
   * was followed from code in no mapping, the pc is rather in code not loaded yet. */
  if (stop == EHELF_STOP_OK && !w->signal &&
      (w->regs.rsp < sp || (w->regs.rsp == sp && !interrupted))) {
    stop = mapped ? EHELF_STOP_CFA_NOT_GROWING : EHELF_STOP_NO_MAPPING;
    if (!mapped) request(w->tgid, pc, EHELF_STOP_NO_MAPPING);
  }
  if (stop != EHELF_STOP_OK) {
    w->stop = stop;
    return 1;
  }
  return 0;
}

/* Whether the walk's registers are those of a frame of the CPU's last walk that it may take the
 * step of (1: it takes frames from there, memo_next). The last walk's frames are looked at in
 * the order of their rsp, as the walk's own grow: at most 4 more a frame.
 * Verifier: a global function, checked once on its own, as memo_take_frames. */
__attribute__((noinline)) int memo_match(struct ehelf_walk *w) {
  if (!w) return 0;
  for (int i = 0; i < 4; i++) {
    const __u32 at = w->memo_cursor;
    if (at >= w->memo.frames) {
      w->memo_usable = 0;
      return 0;
    }
    const struct ehelf_memo_frame *m = memo_at(w->memo.buffer, at);
    if (!m) return 0;
    if (m->regs.rsp < w->regs.rsp) {
      w->memo_cursor = at + 1;
      continue;
    }
    if (m->regs.rsp != w->regs.rsp || !(m->flags & EHELF_MEMO_STEP) ||
        !ehelf_bpf_same_regs(&m->regs, &w->regs))
      return 0;
    w->memo_taking = 1;
    w->memo_next = at;
    return 1;
  }
  return 0;
}

/* One frame taken from the CPU's last walk (memo_next, whose registers the walk has): recorded
 * as walk_one records it, its step checked by reading its words again. 0: taken, go on; 1: the
 * walk ended (the frame limit); -1: not taken (the step differs now, or was not a plain one
 * then): the walk goes on from there on its own. */
static __always_inline long memo_take(struct ehelf_walk *w) {
  const __u32 at = w->memo_next;
  const struct ehelf_memo_frame *m = memo_at(w->memo.buffer, at);
  const struct ehelf_memo_frame *next =
      at + 1 < w->memo.frames ? memo_at(w->memo.buffer, at + 1) : 0;
  const int step = m && next && (m->flags & EHELF_MEMO_STEP);
  if (!step || !ehelf_bpf_memo_check(w, m, &next->regs)) {
    w->memo_changed += step; /* (the words were not those of then) */
    w->memo_taking = 0;
    w->memo_cursor = at + 1; /* (not matched again) */
    if (m) w->regs = m->regs;
    return -1;
  }
  struct ehelf_memo_frame *copy = memo_at(w->memo.buffer ^ 1, w->depth);
  if (copy) *copy = *m;
  const __u64 pc = m->regs.rip;
  w->copy.stack.pcs[w->depth & (EHELF_MAX_FRAMES - 1)] = pc;
  w->depth += 1;
  w->hash = (w->hash ^ pc) * 0x100000001b3ull + (w->hash >> 29);
  w->memo_taken += 1;
  w->memo_next = at + 1;
  if (w->depth >= max_depth || w->depth >= EHELF_MAX_FRAMES) {
    w->regs = m->regs;
    w->stop = EHELF_STOP_DEPTH;
    return 1;
  }
  return 0;
}

/* Up to 4 frames taken from the CPU's last walk, as memo_take says (0: go on; 1: the walk
 * ended; -1: the last was not taken: the walk goes on from there on its own). Four to a call:
 * a bpf_loop callback costs ~12-17 ns, a frame taken ~10.
 * Verifier: a global function, checked once on its own, as memo_match (inlined in the walk's
 * callback, they were followed with each state the walk reached them with: with walk_one's
 * record of its frames, the verifier's work 19k -> 73k instructions, the load ~200 ms longer;
 * now 23k). */
__attribute__((noinline)) int memo_take_frames(struct ehelf_walk *w) {
  if (!w) return -1;
  long taken = 0;
  for (int i = 0; i < 4 && taken == 0; i++) taken = memo_take(w);
  return (int)taken;
}

/* bpf_loop's callback: one frame, or frames taken from the CPU's last walk when they may be. */
static long walk_frame(__u32 index, void *ctx) {
  struct ehelf_walk *w = walk_of(ctx);
  if (!w) return 1;
  if (w->memo_usable && (w->memo_taking || memo_match(w))) {
    const int taken = memo_take_frames(w);
    if (taken >= 0) return taken != 0; /* (a callback returns 0 or 1) */
  }
  return walk_one(w);
}

/* Whether the sampled process runs its parent's program where the parent has it (a fork that
 * has not exec'd since): the same executable and stack addresses, as forked_from checks. */
static int same_program_as_parent(void) {
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  const unsigned long code = BPF_CORE_READ(task, mm, start_code);
  return code != 0 && BPF_CORE_READ(task, real_parent, mm, start_code) == code &&
         BPF_CORE_READ(task, real_parent, mm, start_stack) == BPF_CORE_READ(task, mm, start_stack);
}

/* Whether the process's entry describes the address space the walk runs in (bpf_maps.h:
 * ehelf_process's start_code and start_stack; 0: not known, taken). */
static int entry_is_of_this_space(const struct ehelf_process *p) {
  if (p->start_code == 0) return 1;
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  return BPF_CORE_READ(task, mm, start_code) == p->start_code &&
         BPF_CORE_READ(task, mm, start_stack) == p->start_stack;
}

/* For a process user space has not read yet: the entry of the nearest of its first 4 ancestors
 * that has one, when it is a fork of that ancestor that has not exec'd since (each process on the
 * way has its executable and its stack where the ancestor has them: a fork copies the address
 * space; an exec, or a child reparented to another process, has others), and the entry is the
 * ancestor's now (walked in its present address space, or not walked since user space wrote it).
 * A child that lives a millisecond dies before user space reads its fork record, and its children
 * before theirs. */
static const struct ehelf_process *forked_from(void) {
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  const unsigned long code = BPF_CORE_READ(task, mm, start_code);
  const unsigned long stack = BPF_CORE_READ(task, mm, start_stack);
  if (code == 0) return 0;
  for (int level = 0; level < 4; level++) {
    struct task_struct___ehelf *parent = BPF_CORE_READ(task, real_parent);
    if (!parent || BPF_CORE_READ(parent, mm, start_code) != code ||
        BPF_CORE_READ(parent, mm, start_stack) != stack)
      return 0;
    __u32 parent_tgid = (__u32)BPF_CORE_READ(parent, tgid);
    const struct ehelf_process *p = bpf_map_lookup_elem(&processes, &parent_tgid);
    if (p) /* (0: not walked since user space wrote it, for the address space of then) */
      return p->address_space == 0 || p->address_space == (__u64)BPF_CORE_READ(parent, mm) ? p
                                                                                          : 0;
    task = parent;
  }
  return 0;
}

/* Since when the walk's process has had the address space `space` (its first sample in it, or
 * as near as the spaces map remembers: an entry evicted is made again, later, still after the
 * exec that made the space), or 0: unknown. Most samples: the entry this CPU used last, no
 * lookup. Only a sample of user code makes an entry: exec switches to the new space well before
 * it records the exec (it then frees the old one: milliseconds for a large one, ASan's), and a
 * sample in between, in the kernel, would date the space before the exec that made it. */
static __u64 space_since(struct ehelf_walk *w, __u64 space, int in_user_code) {
  if (w->last_space.tgid == w->tgid && w->last_space.space.address_space == space)
    return w->last_space.space.since;
  struct ehelf_space now = {.address_space = space};
  const struct ehelf_space *known = bpf_map_lookup_elem(&spaces, &w->tgid);
  if (known && known->address_space == space) {
    now.since = known->since;
  } else if (!in_user_code) {
    return 0;
  } else {
    /* (Two CPUs sampling a new space at once may each write their time: microseconds apart,
     * both after its exec.) */
    now.since = bpf_ktime_get_ns();
    bpf_map_update_elem(&spaces, &w->tgid, &now, BPF_ANY);
  }
  w->last_space.tgid = w->tgid;
  w->last_space.space = now;
  return now.since;
}

/* The user registers of the sampled thread into w->regs: the sample's own when it interrupted
 * user code, else those saved at its entry into the kernel. -1 for a kernel thread. (Copied
 * into w, not onto the BPF stack: a pt_regs there left too little of it for the walk.) */
static int user_regs(struct bpf_perf_event_data *ctx, struct ehelf_walk *w) {
  _Static_assert(sizeof(w->saved_regs) == sizeof(struct pt_regs), "pt_regs");
  if ((ctx->regs.cs & 3) == 3) {
    /* (Whole: the verifier takes a context's fields read at fixed offsets only.) */
    __builtin_memcpy(w->saved_regs, &ctx->regs, sizeof(struct pt_regs));
  } else {
    struct task_struct *task = bpf_get_current_task_btf();
    struct pt_regs *saved = (struct pt_regs *)bpf_task_pt_regs(task);
    if (!saved || bpf_probe_read_kernel(w->saved_regs, sizeof(struct pt_regs), saved)) return -1;
  }
  const struct pt_regs *regs = (const struct pt_regs *)w->saved_regs;
  if ((regs->cs & 3) != 3) return -1;
  struct ehelf_bpf_regs *r = &w->regs;
  r->rip = regs->rip;
  r->rsp = regs->rsp;
  r->rbp = regs->rbp;
  r->rbp_known = 1;
  r->rbx = regs->rbx;
  r->rbx_known = 1;
  r->exact_pc = 1;
  return 0;
}

/* bpf_loop's callback for store_stack: the walk's chunk `chunks - 1 - index` into the stacks
 * map (chunk 0 last). 1 (the loop ends) when it found no room.
 * Verifier: a callback is checked once, for any index; the loop it replaces, unrolled or not, was
 * checked chunk by chunk with each of its paths: 43% of the instructions the verifier processed
 * for the whole program, ~15 ms of every start. */
static long store_chunk(__u32 index, void *ctx) {
  struct ehelf_walk *w = walk_of(ctx);
  if (!w) return 1;
  const __u32 chunks = (w->depth + EHELF_STACK_CHUNK - 1) / EHELF_STACK_CHUNK;
  if (index >= chunks) return 1;
  const __u32 i = chunks - 1 - index;
  const __u32 from = (i * EHELF_STACK_CHUNK) & (EHELF_MAX_FRAMES - EHELF_STACK_CHUNK);
  __builtin_memcpy(w->chunk.pcs, &w->copy.stack.pcs[from], sizeof(w->chunk.pcs));
  struct ehelf_stack_key key = {.stack = w->hash, .chunk = i};
  if (bpf_map_update_elem(&stacks, &key, &w->chunk, i == 0 ? BPF_NOEXIST : BPF_ANY) &&
      !bpf_map_lookup_elem(&stacks, &key)) {
    w->stack_stored = 0;
    return 1;
  }
  return 0;
}

/* Puts the walk's stack in the stacks map, its chunks after the first, then the first (which
 * tells the stack is there); 0 when a chunk found no room. */
static int store_stack(struct ehelf_walk *w) {
  w->chunk.depth = w->depth;
  w->chunk.stop = w->stop;
  w->stack_stored = 1;
  const __u32 chunks = (w->depth + EHELF_STACK_CHUNK - 1) / EHELF_STACK_CHUNK;
  struct loop_ctx c = {.replaying = w->replaying};
  bpf_loop(chunks ? chunks : 1, store_chunk, &c, 0);
  return w->stack_stored;
}

/* Counts the walk's stack (with the sample's kernel stack id, period and command: `comm`, or the
 * current task's when 0); 1 when its count is new in this map (its stack must be in `stacks`),
 * 0 when it was there (its stack is, or user space has read it: it evicts only those). */
static int count_stack(struct ehelf_walk *w, __u32 tid, __s32 kernel, __u64 period,
                       const char *comm) {
  struct ehelf_count_key key = {
      .stack = w->hash, .pid = w->tgid, .tid = tid, .kernel = kernel, .space_since = w->space_since};
  void *counts = active ? (void *)&counts1 : (void *)&counts0;
  struct ehelf_count *c = bpf_map_lookup_elem(counts, &key);
  if (c) {
    __sync_fetch_and_add(&c->samples, 1);
    __sync_fetch_and_add(&c->period, period);
    return 0;
  }
  struct ehelf_count fresh = {.samples = 1, .period = period};
  if (comm)
    __builtin_memcpy(fresh.comm, comm, sizeof(fresh.comm));
  else
    bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
  if (bpf_map_update_elem(counts, &key, &fresh, BPF_NOEXIST)) {
    c = bpf_map_lookup_elem(counts, &key); /* another CPU added it first (and its stack) */
    if (!c) {
      count_stat(EHELF_STAT_COUNTS_FULL);
      return 0;
    }
    __sync_fetch_and_add(&c->samples, 1);
    __sync_fetch_and_add(&c->period, period);
    return 0;
  }
  return 1;
}

/* The walk's stack counted (and stored when new), its stop and frames in the stats. */
static void count_walk(struct ehelf_walk *w, __u32 tid, __s32 kernel, __u64 period,
                       const char *comm) {
  if (w->stop == EHELF_STOP_OK) w->stop = EHELF_STOP_DEPTH;
  if (w->stop < EHELF_STOP_COUNT) count_stat(EHELF_STAT_STOPS + w->stop);
  __u64 frames = w->depth;
  __u32 frames_index = EHELF_STAT_FRAMES;
  __u64 *n = bpf_map_lookup_elem(&stats, &frames_index);
  if (n) *n += frames;
  /* (Counted in the walk, added once: a count_stat per read cost the walk's step ~10%. A
   * replay's reads are of the parked copy, not of the stack.) */
  __u32 reads_index = EHELF_STAT_STACK_READS;
  n = bpf_map_lookup_elem(&stats, &reads_index);
  if (n && !w->replaying) *n += w->stack_reads;
  __u32 memo_index = EHELF_STAT_MEMO_FRAMES;
  n = bpf_map_lookup_elem(&stats, &memo_index);
  if (n && w->memo_taken) *n += w->memo_taken;
  __u32 changed_index = EHELF_STAT_MEMO_CHANGED;
  n = bpf_map_lookup_elem(&stats, &changed_index);
  if (n && w->memo_changed) *n += w->memo_changed;
  w->hash ^= (__u64)w->stop << 56;
  w->copy.stack.depth = w->depth;
  w->copy.stack.stop = w->stop;
  /* Stacks stay in the map across drains (user space evicts them in bulk when it fills): a stack
   * seen before costs a lookup, where inserting costs an allocation and a copy per chunk; one
   * counted already since the last drain costs nothing more. The stack is in the map before
   * user space reads the count: it reads a map 2 ms after the program stopped writing it, and a
   * run of the program takes microseconds. */
  if (count_stack(w, tid, kernel, period, comm)) {
    const struct ehelf_stack_key first = {.stack = w->hash};
    if (!bpf_map_lookup_elem(&stacks, &first) && !store_stack(w))
      count_stat(EHELF_STAT_STACKS_FULL);
  }
}

/* Whether the walk stopped for want of something user space loads: the process's mappings, a
 * file's table, or a mapping made since it read them. */
static __always_inline int waits_for_tables(__u32 stop) {
  return stop == EHELF_STOP_NO_PROCESS || stop == EHELF_STOP_NO_TABLE_YET ||
         stop == EHELF_STOP_NO_MAPPING;
}

/* The sample's kernel stack, its id in kernel_stack_traces, or -1: none asked for, or a sample of
 * user code, which has none (bpf_get_stackid takes a callchain buffer to find the kernel's
 * callchain of user registers empty: -EFAULT). */
static __always_inline __s32 kernel_stack(struct bpf_perf_event_data *ctx) {
  if (!kernel_stacks || (ctx->regs.cs & 3) == 3) return -1;
  return (__s32)bpf_get_stackid(ctx, &kernel_stack_traces, 0);
}

/* Parks the sample `w` walked (bpf_maps.h: ehelf_parked): 1, or 0 when it cannot be (no stack
 * readable at rsp, the queue full), to be counted as it is. */
static int park(struct bpf_perf_event_data *ctx, struct ehelf_walk *w, __u32 tid, __u32 copy) {
  __u32 zero = 0;
  struct ehelf_parked *p = bpf_map_lookup_elem(&park_scratch, &zero);
  if (!p) return 0;
  const __u64 rsp = w->start_regs.rsp;
  /* The stack from rsp, 16 KiB as perf copies it, or up to the stack's end: the rest of rsp's
   * page, then page by page (a read fails whole: the stack's last page ends the copy). */
  __u64 first = 4096 - (rsp & 4095);
  if (first > 4096) first = 4096; /* (the verifier's bound) */
  if (first == 0 || bpf_probe_read_user(p->bytes, (__u32)first, (const void *)rsp)) return 0;
  __u64 length = first;
  for (int i = 0; i < 4; i++) {
    const __u64 at = first + (__u64)i * 4096;
    __u64 size = EHELF_PARK_BYTES - at; /* (the last page's part up to 16 KiB from rsp) */
    if (size > 4096) size = 4096;
    if (at >= EHELF_PARK_BYTES || size == 0 ||
        bpf_probe_read_user(&p->bytes[at], (__u32)size, (const void *)(rsp + at)))
      break;
    length = at + size;
  }
  struct task_struct___ehelf *task = (void *)bpf_get_current_task_btf();
  p->regs = w->start_regs;
  p->space = w->space;
  p->start_code = BPF_CORE_READ(task, mm, start_code);
  p->start_stack = BPF_CORE_READ(task, mm, start_stack);
  p->space_since = w->space_since;
  p->sampled_at = w->copy.time ? w->copy.time : bpf_ktime_get_ns();
  p->period = ctx->sample_period;
  p->tgid = w->tgid;
  p->tid = tid;
  p->kernel = kernel_stack(ctx);
  p->copy = copy;
  p->parents_space = w->copy.parents_space;
  p->parent = same_program_as_parent() ? (__u32)BPF_CORE_READ(task, real_parent, tgid) : 0;
  p->length = (__u32)length;
  p->round = 0;
  bpf_get_current_comm(p->comm, sizeof(p->comm));
  if (bpf_map_push_elem(&parked, p, 0)) {
    count_stat(EHELF_STAT_PARK_FULL);
    return 0;
  }
  count_stat(EHELF_STAT_PARKED);
  __sync_fetch_and_add(&parked_waiting, 1);
  count_parked(p->tgid, 1);
  return 1;
}

SEC("perf_event")
int ehelf_sample(struct bpf_perf_event_data *ctx) {
  if (held) return 0;
  __u32 zero = 0;
  struct ehelf_walk *w = bpf_map_lookup_elem(&scratch, &zero);
  if (!w) return 0;
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 tid = (__u32)id;
  w->tgid = (__u32)(id >> 32);
  w->depth = 0;
  w->copy.outside = 0;
  w->stop = EHELF_STOP_OK;
  w->hash = 0xcbf29ce484222325ull;
  w->signal = 0;
  w->window.length = 0; /* another thread's stack, or this one's changed */
  w->stack_reads = 0;
  w->space_since = 0;
  w->replaying = 0;
  /* When the sample began: copy mode pairs its walks with perf's copies by it; else only a parked
   * sample needs a time, its patience's (park reads the clock then: a clock read is ~50 ns on this
   * VM, 1-2% of a deep sample's walk). */
  w->copy.time = copy_every ? bpf_ktime_get_ns() : 0;
  w->copy.parked = 0;
  count_stat(EHELF_STAT_SAMPLES);
  __u32 copy = 0;
  if (copy_every && w->tgid != 0) {
    __u64 *seen = bpf_map_lookup_elem(&stats, &zero);
    copy = seen && *seen % copy_every == 0;
  }
  w->copy.parents_space = copy ? in_parents_space() : 0;
  if (w->tgid != 0 && user_regs(ctx, w) == 0) {
    w->copy.ip = w->regs.rip;
    w->copy.sp = w->regs.rsp;
    w->start_regs = w->regs;
    /* The process's entry: the one this CPU used last while user space has changed no entry
     * since (a CPU mostly samples one process after another: no hash lookup), else the map's. */
    const __u32 generation = process_generation;
    const __u64 space = current_address_space();
    w->space = space;
    w->space_since = space_since(w, space, (ctx->regs.cs & 3) == 3);
    int present = 0;
    if (!find_mappings_only && w->last_process.valid && w->last_process.tgid == w->tgid &&
        w->last_process.generation == generation) {
      present = w->last_process.address_space == space;
    } else if (!find_mappings_only) {
      w->last_process.valid = 0;
      struct ehelf_process *p = bpf_map_lookup_elem(&processes, &w->tgid);
      /* Mappings read before an exec describe the program before it: not walked with (they
       * would stop at no entry, or give the old program's frames) until user space reads the
       * new ones. */
      if (p) {
        /* (An entry copied from the parent at the fork is the child's only while it runs the
         * parent's program: not after an exec that came before its first sample.) */
        if (p->address_space == 0 && (!p->inherited || same_program_as_parent()) &&
            entry_is_of_this_space(p))
          p->address_space = space;
        present = p->address_space == space;
        w->last_process.tgid = w->tgid;
        w->last_process.generation = generation;
        w->last_process.address_space = p->address_space;
        w->last_process.first_mapping = p->first_mapping;
        w->last_process.mapping_count = p->mapping_count;
        w->last_process.valid = 1;
      }
    }
    w->known_process = present;
    w->first_mapping = present ? w->last_process.first_mapping : 0;
    w->mapping_count = present ? w->last_process.mapping_count : 0;
    if (!present && !find_mappings_only) {
      const struct ehelf_process *parent = forked_from();
      if (parent) {
        w->known_process = 1;
        w->first_mapping = parent->first_mapping;
        w->mapping_count = parent->mapping_count;
      }
    }
    w->learned.count = 0;
    w->learned.next = 0;
    w->learned_read = w->vma_asked = w->learned_added = w->vma_deferred = 0;
    w->last_mapping = w->first_mapping;
    /* The CPU's last walk may lend its frames when it walked this process in this address
     * space, with its mappings and tables as they are now. */
    const __u32 tables_then = table_generation;
    const struct ehelf_memo *memo = &w->memo;
    w->memo_usable = present && memo->frames && memo->tgid == w->tgid && memo->space == space &&
                     memo->process_generation == generation &&
                     memo->table_generation == tables_then &&
                     memo->first_mapping == w->first_mapping &&
                     memo->mapping_count == w->mapping_count;
    w->memo_cursor = w->memo_taking = w->memo_next = w->memo_taken = w->memo_changed = 0;
    /* A process user space has not read (since its exec) is walked through the files the
     * kernel says its pcs are in, as far as user space has their tables. */
    struct loop_ctx c = {.replaying = 0};
    bpf_loop(EHELF_MAX_FRAMES, walk_frame, &c, 0);
    /* This walk is now the CPU's last (its frames are in the other buffer). */
    w->memo.buffer ^= 1;
    w->memo.frames = present && !find_mappings_only ? w->depth : 0;
    w->memo.tgid = w->tgid;
    w->memo.space = space;
    w->memo.process_generation = generation;
    w->memo.table_generation = tables_then;
    w->memo.first_mapping = w->first_mapping;
    w->memo.mapping_count = w->mapping_count;
    if (!present && !find_mappings_only) request(w->tgid, w->regs.rip, EHELF_STOP_NO_PROCESS);
    /* What this walk found, for the process's next ones (another CPU's walk may write its own
     * at the same time: one of the two is kept, the other found again). */
    if (w->learned_added) bpf_map_update_elem(&learned, &w->tgid, &w->learned, BPF_ANY);
    /* A walk that waits for user space waits in the kernel, counted when walked again. (In
     * copy mode perf has its stack copy now: its walk reaches `copies` then.) */
    if (park_samples && waits_for_tables(w->stop) && park(ctx, w, tid, copy)) return copy;
  } else {
    w->copy.ip = w->copy.sp = 0;
    w->stop = EHELF_STOP_END; /* a kernel thread: no user stack */
  }
  count_walk(w, tid, kernel_stack(ctx), ctx->sample_period, 0);
  if (copy) {
    w->copy.tid = tid;
    if (bpf_ringbuf_output(&copies, &w->copy, sizeof(w->copy), 0) == 0) return 1;
    count_stat(EHELF_STAT_COPIES_LOST);
  }
  return 0; /* the sample goes no further: no stack bytes, no record */
}

/* How long a parked sample waits for its tables at most (a file of millions of rows builds in
 * under a second, a process's maps are read in milliseconds): then it is counted as walked. */
#define EHELF_PARK_PATIENCE_NS 5000000000ull

/* The parked sample `p`, walked again into `w` as ehelf_sample walks a sample, but from its
 * parked registers and stack, with the process's entry for the address space it was sampled
 * in (the current task is user space's). */
static void walk_parked(struct ehelf_walk *w, const struct ehelf_parked *p) {
  w->tgid = p->tgid;
  w->depth = 0;
  w->copy.outside = 0;
  w->stop = EHELF_STOP_OK;
  w->hash = 0xcbf29ce484222325ull;
  w->signal = 0;
  w->window.length = 0;
  w->stack_reads = 0;
  w->space_since = p->space_since;
  w->replaying = 1;
  w->space = p->space;
  w->regs = p->regs;
  w->start_regs = p->regs;
  w->copy.ip = p->regs.rip;
  w->copy.sp = p->regs.rsp;
  w->copy.time = p->sampled_at;
  w->copy.parked = 1;
  w->copy.parents_space = p->parents_space;
  const struct ehelf_process *e = bpf_map_lookup_elem(&processes, &w->tgid);
  /* The entry is the sample's when the program took it in that address space, or, not taken
   * yet, when it was read in one whose code and stack begin where the sample's did (for an
   * entry copied at a fork too: a child that had exec'd has them elsewhere). */
  int present = 0;
  if (e && !find_mappings_only) {
    if (e->address_space != 0)
      present = e->address_space == p->space;
    else if (e->start_code != 0)
      present = e->start_code == p->start_code && e->start_stack == p->start_stack;
    else
      present = !e->inherited;
  }
  /* A fork sampled before its exec, walked again after it: its entry is of the program it
   * exec'd now; the parent's describes the one it ran (the same code and stack addresses). */
  if (!present && p->parent != 0 && !find_mappings_only) {
    __u32 parent = p->parent;
    e = bpf_map_lookup_elem(&processes, &parent);
    present = e && e->start_code != 0 && e->start_code == p->start_code &&
              e->start_stack == p->start_stack;
  }
  w->first_mapping = present && e ? e->first_mapping : 0;
  w->mapping_count = present && e ? e->mapping_count : 0;
  /* Else a program the process ran before an exec, or before it exited, while the sample
   * waited. */
  if (!present && !find_mappings_only) {
    const struct ehelf_past_programs *past = bpf_map_lookup_elem(&past_programs, &w->tgid);
    for (int i = 0; past && i < EHELF_PAST_PROGRAMS; i++) {
      const struct ehelf_past_program *g = &past->programs[i];
      if (g->mapping_count && p->sampled_at >= g->valid_from && p->sampled_at < g->valid_to) {
        w->first_mapping = g->first_mapping;
        w->mapping_count = g->mapping_count;
        present = 1;
        break;
      }
    }
  }
  w->known_process = present;
  w->last_mapping = w->first_mapping;
  w->learned.count = 0;
  w->learned.next = 0;
  w->learned_read = w->vma_asked = w->learned_added = w->vma_deferred = 0;
  w->memo_usable = w->memo_taking = w->memo_taken = w->memo_changed = 0; /* (the samples') */
  struct loop_ctx c = {.replaying = 1};
  bpf_loop(EHELF_MAX_FRAMES, walk_frame, &c, 0);
}

/* bpf_loop's callback for ehelf_replay: the next parked sample walked again, and counted, or put
 * back while what it waits for is not loaded yet. 1 (the run ends) when the queue is empty, or
 * its next sample was put back in this round already. */
static long replay_one(__u32 index, void *unused) {
  __u32 zero = 0;
  struct ehelf_parked *p = bpf_map_lookup_elem(&replay_parked, &zero);
  struct ehelf_walk *w = bpf_map_lookup_elem(&replay_scratch, &zero);
  if (!p || !w || bpf_map_pop_elem(&parked, p)) return 1;
  const __u32 round = replay_round;
  if (p->round == round && !replay_final && bpf_map_push_elem(&parked, p, 0) == 0) return 1;
  walk_parked(w, p);
  if (waits_for_tables(w->stop) && !replay_final &&
      bpf_ktime_get_ns() - p->sampled_at < EHELF_PARK_PATIENCE_NS) {
    p->round = round;
    if (bpf_map_push_elem(&parked, p, 0) == 0) return 0;
  }
  /* (Counted as walked now, also when it could not be put back.) */
  count_walk(w, p->tid, p->kernel, p->period, p->comm);
  count_stat(EHELF_STAT_REPLAYED);
  __sync_fetch_and_sub(&parked_waiting, 1);
  count_parked(p->tgid, -1);
  if (p->copy) {
    w->copy.tid = p->tid;
    if (bpf_ringbuf_output(&copies, &w->copy, sizeof(w->copy), 0)) count_stat(EHELF_STAT_COPIES_LOST);
  }
  return 0;
}

/* The parked samples walked again, run by user space (BPF_PROG_TEST_RUN) once it has loaded
 * tables or processes they may wait for; never attached. */
SEC("raw_tp")
int ehelf_replay(void *ctx) {
  bpf_loop(EHELF_PARK_ENTRIES, replay_one, 0, 0);
  return 0;
}
