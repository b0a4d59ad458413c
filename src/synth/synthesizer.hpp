// The synthesizer: recomputes a module's unwind table from its machine code (the paper's
// Algorithm 2). Functions are discovered from symbols, existing FDE starts, call targets and the
// entry point; each is explored from its entry over the control flow the x86 layer decodes, with
// a forward analysis of the CFA (rsp-based; rbp-based after `mov %rsp,%rbp`) and of the save
// slots of the callee-saved registers. Where two paths meet with different states, the meeting
// is reported rather than papered over.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"
#include "support/result.hpp"
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

struct Conflict {
  std::string function;
  uint64_t address = 0;
  FrameState first, second;
};

struct AnalysedInstruction {
  uint64_t address = 0;
  uint8_t length = 0;
  uint32_t function = 0; // index into SynthResult::functions
  FrameState state;      // before the instruction
};

struct SynthFunction {
  std::string name; // symbol name, or "fn_<hex>"
  uint64_t begin = 0, end = 0;
  uint64_t instructions = 0;
  bool outermost = false; // the entry point: no caller, the return address is undefined
  std::string failure;    // why (part of) it could not be analysed; empty if it could
  // Its parts: [begin, end) first, then the split-off .cold parts its jumps entered. Each gets its
  // own FDE, with its own C++ exception table (synth/exception_tables.hpp; 0: none).
  struct Part {
    uint64_t begin = 0, end = 0;
    uint64_t lsda = 0;
    // Found by a jump with the frame in place to code no symbol or FDE bounds (a stripped
    // file's .cold part): its end, the next known start while analysing, is then trimmed to its
    // last analysed instruction.
    bool by_jump = false;
  };
  std::vector<Part> parts;
  const Part& part_of(uint64_t address) const; // the part holding address (else the first)
};

struct SynthResult {
  std::vector<SynthFunction> functions;
  std::vector<AnalysedInstruction> instructions; // sorted by address
  std::vector<Conflict> conflicts;
  uint64_t text_bytes = 0;                // bytes of executable sections analysed
  uint64_t jump_tables = 0;               // switch dispatches whose targets were read
  uint64_t unresolved_indirect_jumps = 0; // other `jmp *` (tail calls through a pointer...)
  // C++ exception handling carried over (synth/exception_tables.hpp).
  uint64_t personality_slot = 0, personality = 0;
  uint64_t lsdas_found = 0, lsdas_matched = 0;
  UnwindTable table;
};

// Analyses every function of `elf` and builds the synthesized table. `shipped`, the file's own
// table if it has one, contributes only its function starts. Fails only when the file has no
// executable section; functions that cannot be analysed are listed with the reason.
Result<SynthResult> synthesize(const ElfFile& elf, const UnwindTable* shipped = nullptr);

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
