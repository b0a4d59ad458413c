#include "bpf/bpf_twin.hpp"

#include <vector>

#include "model/registers.hpp"

namespace ehelf {
namespace {

// What the step's `ctx` stands for in user space: the process's memory and the file's page
// index and rows, at global indexes [0, index size) and on, as they lie in the kernel's pool.
struct TwinContext {
  MemoryReader& mem;
  const std::vector<ehelf_bpf_row>& page_index;
  const std::vector<ehelf_bpf_row>& rows;
};

int twin_read_u64(void* ctx, uint64_t addr, __u64* out) {
  return static_cast<TwinContext*>(ctx)->mem.read(addr, out, sizeof *out) ? 0 : -1;
}

const ehelf_bpf_row* twin_row_at(void* ctx, uint64_t index) {
  const TwinContext& c = *static_cast<TwinContext*>(ctx);
  if (index < c.page_index.size()) return &c.page_index[index];
  index -= c.page_index.size();
  return index < c.rows.size() ? &c.rows[index] : nullptr;
}

} // namespace
} // namespace ehelf

#define EHELF_READ_U64(ctx, addr, out) ::ehelf::twin_read_u64((ctx), (addr), (out))
#define EHELF_ROW_AT(ctx, index) ::ehelf::twin_row_at((ctx), (index))
#include "bpf/bpf_walk.h"

namespace ehelf {

namespace {

ehelf_bpf_table_view view_of(const BpfTable& table) {
  ehelf_bpf_table_view view{};
  view.first_index = 0;
  view.first_row = table.page_index.size();
  view.row_count = __u32(table.rows.size());
  view.page_count = table.page_count;
  view.page_shift = table.page_shift;
  return view;
}

} // namespace

int64_t bpf_twin_find_row(const BpfTable& table, uint64_t pc) {
  if (pc < table.base || pc - table.base > UINT32_MAX || table.rows.size() > UINT32_MAX) return -1;
  NoMemory none;
  TwinContext ctx{none, table.page_index, table.rows};
  const ehelf_bpf_table_view view = view_of(table);
  const __s64 index = ehelf_bpf_find_row(&ctx, &view, __u32(pc - table.base));
  return index < 0 ? -1 : int64_t(index - __s64(view.first_row));
}

int bpf_twin_step(const BpfTable& table, uint64_t pc, RegisterState& regs, MemoryReader& mem,
                  bool& signal_frame) {
  if (!regs.has(x86_64::RIP)) return EHELF_STOP_END;
  if (!regs.has(x86_64::RSP)) return EHELF_STOP_BAD_READ; // no stack to read: not in the kernel
  if (pc < table.base || pc - table.base > UINT32_MAX || table.rows.size() > UINT32_MAX)
    return EHELF_STOP_NO_ENTRY;
  TwinContext ctx{mem, table.page_index, table.rows};
  const ehelf_bpf_table_view view = view_of(table);
  const __s64 index = ehelf_bpf_find_row(&ctx, &view, __u32(pc - table.base));
  if (index < 0) return EHELF_STOP_NO_ENTRY;
  ehelf_bpf_regs r{};
  r.rip = regs.get(x86_64::RIP);
  r.rsp = regs.get(x86_64::RSP);
  r.rbp = regs.get(x86_64::RBP);
  r.rbp_known = regs.has(x86_64::RBP);
  r.rbx = regs.get(x86_64::RBX);
  r.rbx_known = regs.has(x86_64::RBX);
  const int stop = ehelf_bpf_step(twin_row_at(&ctx, uint64_t(index)), &r, &ctx);
  if (stop != EHELF_STOP_OK) return stop;
  regs.set(x86_64::RIP, r.rip);
  regs.set(x86_64::RSP, r.rsp);
  if (r.rbp_known)
    regs.set(x86_64::RBP, r.rbp);
  else
    regs.clear(x86_64::RBP);
  if (r.rbx_known)
    regs.set(x86_64::RBX, r.rbx);
  else
    regs.clear(x86_64::RBX);
  signal_frame = r.exact_pc != 0;
  return EHELF_STOP_OK;
}

} // namespace ehelf
