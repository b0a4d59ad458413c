// FrameState: what the synthesizer's forward analysis knows about a function's frame before one
// instruction (where the CFA is, from rsp, rbp or a realigned stack's DRAP register, and where
// the callee-saved registers are saved), how one instruction's stack effects change it (apply,
// over the x86 layer's arch-neutral stack ops), how two paths that meet combine (same_frame,
// join), and the unwind row a state gives (state_row). The synthesizer (synthesizer.hpp) drives
// it over each function's control flow; nothing here decodes or reads a file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/unwind_table.hpp"
#include "x86/abi.hpp"
#include "x86/instruction.hpp"

namespace ehelf::synth {

// What the analysis knows before one instruction.
struct FrameState {
  bool rsp_known = true;
  int32_t height = 8; // rsp = CFA - height (A - height when rsp_aligned)
  bool rbp_known = false;
  int32_t rbp_depth = 0; // rbp = CFA - rbp_depth (A - rbp_depth when rbp_aligned)
  bool cfa_on_rbp = false;
  // Stack realignment with a DRAP (gcc: `lea 8(%rsp),%r10; and $-32,%rsp; push -8(%r10);
  // push %rbp; mov %rsp,%rbp; push %r10`): after the `and`, rsp (and rbp copied from it) are
  // known relative to the aligned address A, at an unknown distance from the CFA, and so are the
  // saves made there (bit per x86::Reg in saved_aligned). The CFA is then the DRAP register
  // (drap = CFA - drap_depth) or, once that register is pushed, the value in its slot at
  // A + drap_slot.
  bool rsp_aligned = false;
  bool rbp_aligned = false;
  uint16_t saved_aligned = 0;
  x86::Reg drap = x86::Reg::none;
  int32_t drap_depth = 0;
  int32_t drap_slot = 0; // 0: not pushed
  // For each x86::Reg: the CFA offset of its save slot (0: not saved), and whether its
  // caller's value has been overwritten since entry.
  int32_t saved[16] = {};
  uint16_t clobbered = 0;
  // For each x86::Reg restored from its save slot: that slot's CFA offset (the register and the
  // slot still hold the same value, so a table that keeps the save rule is equivalent).
  int32_t restored[16] = {};
  uint16_t restored_aligned = 0; // bit per x86::Reg: restored[r] is an offset from A

  bool cfa_known() const {
    return (cfa_on_rbp && rbp_known && !rbp_aligned) || (rsp_known && !rsp_aligned) ||
           drap != x86::Reg::none || drap_slot_base() != x86::Reg::none;
  }
  // The register the DRAP slot is reached from (rbp, else rsp, aligned and known), or none.
  x86::Reg drap_slot_base() const {
    if (!drap_slot) return x86::Reg::none;
    if (rbp_known && rbp_aligned) return x86::Reg::rbp;
    if (rsp_known && rsp_aligned) return x86::Reg::rsp;
    return x86::Reg::none;
  }
  bool operator==(const FrameState&) const = default;
};
std::string describe(const FrameState& s); // "CFA=rsp+16 rbx@-16"
// For keeping each distinct state once.
struct FrameStateHash {
  size_t operator()(const FrameState& s) const;
};

using x86::kCalleeSaved;

// A frame in place (saved registers, the CFA on a frame pointer, rsp moved or unknown): a jump
// in this state is no tail call.
bool has_frame(const FrameState& s);
// Whether every save slot lies below the return address, as in any real frame. A store over the
// return address or above it (`mov %rbp,(%rsp)` at CFA=rsp+8: a stack argument) is taken for a
// save only when the analysis entered the code in a wrong state (a cold part taken from a
// function entry's state): such a state says nothing about the code it jumps to.
bool saves_below_return_address(const FrameState& s);
// The key the paths meeting at an instruction must agree on: the CFA and the save slots.
bool same_frame(const FrameState& a, const FrameState& b);
// `into` joined with `other` where same_frame holds: what either path may have lost is lost.
FrameState join(FrameState into, const FrameState& other);
// The state after `in` (its stack ops, register writes, and a call's clobbers).
void apply(FrameState& s, const x86::Instruction& in);

// The DWARF register number of a general-purpose register.
uint16_t dwarf_column(x86::Reg r);

// The row a state gives (CFA, return address at CFA-8, the save slots), in `table`'s pools.
// False when the CFA is unknown.
// An outermost frame (`outermost`) gets an undefined return address, and a row even where its CFA
// is unknown (rsp + 8 then, as glibc's _start: nothing unwinds past it).
bool state_row(const FrameState& s, bool outermost, class ExpressionPool& expressions,
               std::vector<ColumnRule>& columns, CfaRule& cfa);

// The DWARF expressions of a table's rows (DRAP frames: `DW_OP_breg6 -16; DW_OP_deref`), each
// added to the table's pool once.
class ExpressionPool {
public:
  explicit ExpressionPool(UnwindTable& table) : table_(table) {}
  uint32_t intern(const std::vector<uint8_t>& bytes);

private:
  UnwindTable& table_;
  std::map<std::string, uint32_t> ids_; // by the expression's bytes
};

} // namespace ehelf::synth
