// encode_bpf_rows: a module's unwind table as the in-kernel walk's rows (bpf_walk.h), the array a
// BPF map holds for the file. One row per range of the model, a NONE row in each gap and after
// the last range, adjacent identical rows merged.
//
// Mapping of a model row (only rip, rsp and rbp matter: the walk tracks no other register, so a
// rule on rbx or any other register is ignored):
//   CFA = rsp/rbp + n, rip saved at CFA + o      CFA_RSP / CFA_RBP (to_unwind_rule's cases)
//   rip undefined (CFA = rsp/rbp + n, or PLT)    END
//   CFA = DW_OP_breg7 N; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litK; DW_OP_ge;
//         DW_OP_lit3; DW_OP_shl; DW_OP_plus      PLT (cfa_offset N, threshold K in rbp_offset)
//   CFA = DW_OP_breg7 X; DW_OP_deref, rip and rbp saved at DW_OP_breg7 Y / Z, in an FDE with
//         the 'S' augmentation (glibc's __restore_rt: the kernel's rt_sigframe)   SIGNAL
//   anything else                                STOP, cfa_offset = the NotExpressible reason
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bpf/bpf_walk.h"
#include "model/unwind_table.hpp"
#include "runtime/unwind_rule.hpp"
#include "support/result.hpp"

namespace ehelf {

static_assert(sizeof(ehelf_bpf_row) == 16, "a BPF map value: 16 bytes a row");

inline constexpr unsigned kBpfRowKindCount = EHELF_ROW_CFA_RBX + 1;
std::string_view bpf_row_kind_name(unsigned kind); // "none", "cfa_rsp", ...

struct BpfTable {
  uint64_t base = 0;               // the lowest address of the table: rows' pc are relative to it
  std::vector<ehelf_bpf_row> rows; // sorted by pc; the last is a NONE row at the table's end
  // The page index (bpf_walk.h), EHELF_PAGE_ENTRIES entries a row: page_count + 1 entries over
  // pages of 2^page_shift bytes, the smallest pages (at least 16 bytes) for which the index
  // holds no more entries than there are rows (at most a quarter more memory).
  std::vector<ehelf_bpf_row> page_index;
  uint32_t page_count = 0, page_shift = 0;
  std::array<uint64_t, kBpfRowKindCount> rows_by_kind{};       // over `rows`
  std::array<uint64_t, kNotExpressibleCount> stop_by_reason{}; // STOP rows, by cfa_offset
  size_t bytes() const { return (page_index.size() + rows.size()) * sizeof(ehelf_bpf_row); }
};

// The rows of `table` (its ranges sorted and disjoint, as UnwindTable::finish leaves them). An
// error when a range ends 4 GiB or more above the base (a row's pc is 32 bits: such a file gets
// no rows rather than wrong ones) or when the ranges are not sorted and disjoint.
Result<BpfTable> encode_bpf_rows(const UnwindTable& table);

// The row of one model row of function `fn` (pc left 0).
ehelf_bpf_row encode_bpf_row(const UnwindTable& table, RowView row, const FunctionInfo& fn);

// "1,234 rows, 19,744 bytes: 900 cfa_rsp, ...; stop: 12 cfa is an expression, ..."
std::string describe(const BpfTable& rows);

} // namespace ehelf
