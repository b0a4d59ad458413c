#include "bpf/bpf_twin.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

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

namespace {

// The kernel's registers of `regs` (rip and rsp known).
ehelf_bpf_regs bpf_regs_of(const RegisterState& regs) {
  ehelf_bpf_regs r{};
  r.rip = regs.get(x86_64::RIP);
  r.rsp = regs.get(x86_64::RSP);
  r.rbp = regs.get(x86_64::RBP);
  r.rbp_known = regs.has(x86_64::RBP);
  r.rbx = regs.get(x86_64::RBX);
  r.rbx_known = regs.has(x86_64::RBX);
  return r;
}

// The step at `pc` from `r` (into `r`), through the row it finds (`*row`), or a stop.
int step_in(const BpfTable& table, uint64_t pc, ehelf_bpf_regs& r, MemoryReader& mem,
            const ehelf_bpf_row** row) {
  if (pc < table.base || pc - table.base > UINT32_MAX || table.rows.size() > UINT32_MAX)
    return EHELF_STOP_NO_ENTRY;
  TwinContext ctx{mem, table.page_index, table.rows};
  const ehelf_bpf_table_view view = view_of(table);
  const __s64 index = ehelf_bpf_find_row(&ctx, &view, __u32(pc - table.base));
  if (index < 0) return EHELF_STOP_NO_ENTRY;
  *row = twin_row_at(&ctx, uint64_t(index));
  return ehelf_bpf_step(*row, &r, &ctx);
}

// Memory as `real` has it, but for every 8-byte word at an address not in `kept`, which reads
// with its bits flipped; or (`kept` of one address, `flip_kept`) only that word flipped.
class FlippedWords final : public MemoryReader {
public:
  FlippedWords(MemoryReader& real, std::vector<uint64_t> kept, bool flip_kept)
      : real_(real), kept_(std::move(kept)), flip_kept_(flip_kept) {}
  bool read(uint64_t addr, void* out, size_t size) override {
    if (!real_.read(addr, out, size)) return false;
    const bool listed = std::find(kept_.begin(), kept_.end(), addr) != kept_.end();
    if (listed == flip_kept_)
      for (size_t i = 0; i < size; ++i)
        static_cast<uint8_t*>(out)[i] ^= 0xa5;
    return true;
  }

private:
  MemoryReader& real_;
  std::vector<uint64_t> kept_;
  bool flip_kept_;
};

} // namespace

int bpf_twin_memo_of(const BpfTable& table, uint64_t pc, const RegisterState& regs,
                     MemoryReader& mem, ehelf_memo_frame& memo, ehelf_bpf_regs& caller) {
  if (!regs.has(x86_64::RIP)) return EHELF_STOP_END;
  if (!regs.has(x86_64::RSP)) return EHELF_STOP_BAD_READ;
  memo = ehelf_memo_frame{};
  memo.regs = bpf_regs_of(regs);
  caller = memo.regs;
  const ehelf_bpf_row* row = nullptr;
  const int stop = step_in(table, pc, caller, mem, &row);
  if (stop == EHELF_STOP_OK && row) ehelf_bpf_memo_record(&memo, row, &caller);
  return stop;
}

bool bpf_twin_memo_check(const ehelf_memo_frame& memo, const ehelf_bpf_regs& caller,
                         MemoryReader& mem) {
  const std::vector<ehelf_bpf_row> no_rows;
  TwinContext ctx{mem, no_rows, no_rows};
  return ehelf_bpf_memo_check(&ctx, &memo, &caller) != 0;
}

bool bpf_twin_memo_sound(const BpfTable& table, uint64_t pc, const RegisterState& regs,
                         MemoryReader& mem, std::string* why) {
  ehelf_memo_frame memo{};
  ehelf_bpf_regs caller{};
  if (bpf_twin_memo_of(table, pc, regs, mem, memo, caller) != EHELF_STOP_OK ||
      !(memo.flags & EHELF_MEMO_STEP))
    return true;
  auto fail = [&](std::string what) {
    if (why) *why = fmt::format("pc {:#x}: {}", pc, what);
    return false;
  };
  if (!bpf_twin_memo_check(memo, caller, mem)) return fail("the kept words are not the caller's");
  std::vector<uint64_t> listed = {caller.rsp + uint64_t(int64_t(memo.rip_offset))};
  if (memo.flags & EHELF_MEMO_RBP_READ)
    listed.push_back(caller.rsp + uint64_t(int64_t(memo.rbp_offset)));
  if (memo.flags & EHELF_MEMO_RBX_READ)
    listed.push_back(caller.rsp + uint64_t(int64_t(memo.rbx_offset)));
  FlippedWords others(mem, listed, false);
  ehelf_bpf_regs again = memo.regs;
  const ehelf_bpf_row* row_again = nullptr;
  if (step_in(table, pc, again, others, &row_again) != EHELF_STOP_OK ||
      !ehelf_bpf_same_regs(&again, &caller))
    return fail("the step read a word the memo does not keep");
  for (uint64_t addr : listed) {
    FlippedWords one(mem, {addr}, true);
    if (bpf_twin_memo_check(memo, caller, one))
      return fail(fmt::format("the word at {:#x} changed, the check still passes", addr));
  }
  return true;
}

int bpf_twin_step(const BpfTable& table, uint64_t pc, RegisterState& regs, MemoryReader& mem,
                  bool& signal_frame) {
  if (!regs.has(x86_64::RIP)) return EHELF_STOP_END;
  if (!regs.has(x86_64::RSP)) return EHELF_STOP_BAD_READ; // no stack to read: not in the kernel
  ehelf_bpf_regs r = bpf_regs_of(regs);
  const ehelf_bpf_row* row = nullptr;
  const int stop = step_in(table, pc, r, mem, &row);
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
