// The user-space twin of the in-kernel step: bpf_walk.h's ehelf_bpf_find_row and ehelf_bpf_step,
// the very C the BPF program runs, over the rows encode_bpf_rows made and memory read through a
// MemoryReader. The backend oracle holds it to the model (bpf_check.hpp).
#pragma once

#include <cstdint>

#include "bpf/bpf_rows.hpp"
#include "model/memory_reader.hpp"
#include "model/register_state.hpp"

namespace ehelf {

// One step of the kernel's walk at lookup address `pc` (the pc itself, or the return address
// - 1, as the walk chooses) from the callee's rip, rsp, rbp and rbx in `regs` (rip and rsp must
// be known, as they always are in the kernel). Returns an enum ehelf_walk_stop: EHELF_STOP_OK
// when `regs` hold the caller's rip, rsp, rbp and rbx (rbp and rbx cleared when unknown; other
// registers untouched)
// and `signal_frame` says whether the caller's pc is exact; otherwise `regs` are unchanged
// (EHELF_STOP_NO_ENTRY also for a pc outside the table).
// The index in table.rows of the row covering `pc`, or -1: the kernel's search through the page
// index (bpf_walk.h's ehelf_bpf_find_row).
int64_t bpf_twin_find_row(const BpfTable& table, uint64_t pc);

int bpf_twin_step(const BpfTable& table, uint64_t pc, RegisterState& regs, MemoryReader& mem,
                  bool& signal_frame);

} // namespace ehelf
