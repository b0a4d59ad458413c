// The user-space twin of the in-kernel step: bpf_walk.h's ehelf_bpf_find_row and ehelf_bpf_step,
// the very C the BPF program runs, over the rows encode_bpf_rows made and memory read through a
// MemoryReader. The backend oracle holds it to the model (bpf_check.hpp).
#pragma once

#include <cstdint>
#include <string>

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

// The step at `pc` from `regs` as the BPF program keeps it for its CPU's next walk: `memo` (its
// registers the callee's; flags 0 when the step is not kept: not a row's plain one) and `caller`
// the step's result, when it returns EHELF_STOP_OK (else the stop).
int bpf_twin_memo_of(const BpfTable& table, uint64_t pc, const RegisterState& regs,
                     MemoryReader& mem, ehelf_memo_frame& memo, ehelf_bpf_regs& caller);

// Whether `mem` holds, where the step kept in `memo` read them, the words that made `caller`
// (bpf_walk.h: ehelf_bpf_memo_check, the program's check before it takes the step again).
bool bpf_twin_memo_check(const ehelf_memo_frame& memo, const ehelf_bpf_regs& caller,
                         MemoryReader& mem);

// Whether the step at `pc` from `regs` may be taken again as the BPF program takes the frames of
// its CPU's last walk (bpf_walk.h: ehelf_bpf_memo_record, ehelf_bpf_memo_check), or is never
// taken so (true both): when the step keeps a memo frame, the words it lists must hold the
// caller's registers in `mem`, the step must leave the same caller with every other word of
// memory changed, and any one listed word changed must fail the check. Otherwise false, and
// `why` (when given) says which failed.
bool bpf_twin_memo_sound(const BpfTable& table, uint64_t pc, const RegisterState& regs,
                         MemoryReader& mem, std::string* why = nullptr);

} // namespace ehelf
