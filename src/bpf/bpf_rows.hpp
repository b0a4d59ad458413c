// encode_bpf_rows: a file's unwind table (the model) as the in-kernel walk's rows (bpf_walk.h),
// one more form of the compact rules: one row per range of the model, NONE rows in the gaps,
// the PLT and signal-frame expressions as kinds of their own, every other row the model has
// and BPF cannot follow a STOP row naming why.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "bpf/bpf_walk.h"
#include "model/unwind_table.hpp"

namespace ehelf::bpf {

struct BpfTable {
  uint64_t base = 0; // the lowest address: rows hold pc - base
  std::vector<ehelf_bpf_row> rows;
  std::array<uint64_t, 7> kinds{};            // rows by kind (ehelf_row_kind)
  std::array<uint64_t, 16> not_expressible{}; // STOP rows by reason (NotExpressible)
  uint64_t beyond_4gib = 0; // ranges more than 4 GiB above the base, left out (walks stop)
};

BpfTable encode_bpf_rows(const UnwindTable& table);

} // namespace ehelf::bpf
