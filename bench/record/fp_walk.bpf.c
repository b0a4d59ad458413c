// SPDX-License-Identifier: MIT
/* The in-kernel walk's peer for the record_kernel benchmark: the kernel's own walk of a user
 * stack by its frame pointers (bpf_get_stackid with BPF_F_USER_STACK: the walk of `perf record
 * -g`, bpftrace's ustack and bcc's profile), each stack counted in a hash map by process and
 * thread, as ehelf's program counts its own. What a sample costs a BPF profiler that needs frame
 * pointers, on the same machine, in the same run. */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL"; /* bpf_get_stackid is for GPL programs */

#define FP_WALK_MAX_FRAMES 127 /* the kernel's perf_event_max_stack by default */

struct {
  __uint(type, BPF_MAP_TYPE_STACK_TRACE);
  __uint(max_entries, 16384);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, FP_WALK_MAX_FRAMES * sizeof(__u64));
} stacks SEC(".maps");

struct fp_walk_key {
  __u32 pid;
  __u32 tid;
  __s32 stack; /* the stacks map's id, or negative: the walk failed */
  __u32 reserved;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct fp_walk_key);
  __type(value, __u64);
} counts SEC(".maps");

SEC("perf_event")
int fp_walk_sample(struct bpf_perf_event_data *ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  struct fp_walk_key key = {.pid = (__u32)(id >> 32), .tid = (__u32)id};
  key.stack = (__s32)bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
  __u64 *n = bpf_map_lookup_elem(&counts, &key);
  if (n) {
    __sync_fetch_and_add(n, 1);
    return 0;
  }
  const __u64 one = 1;
  bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST);
  return 0;
}
