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
#include "synth/frame_state.hpp"

namespace ehelf::synth {

struct Conflict {
  std::string function;
  uint64_t address = 0;
  FrameState first, second;
};

struct AnalysedInstruction {
  uint64_t address = 0;
  uint8_t length = 0;
  uint32_t function = 0; // index into SynthResult::functions
  uint32_t state = 0;    // before the instruction: index into SynthResult::states
};
// Few distinct states serve many instructions: each is kept once (24 bytes an instruction, where
// a state is 180).
static_assert(sizeof(AnalysedInstruction) == 24);

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

struct SynthResult;
// The function one of whose parts holds `address`, or null.
const SynthFunction* function_at(const SynthResult& result, uint64_t address);

struct SynthResult {
  std::vector<SynthFunction> functions;
  std::vector<AnalysedInstruction> instructions; // sorted by address
  std::vector<FrameState> states;                // each distinct state once
  const FrameState& state_of(const AnalysedInstruction& in) const { return states[in.state]; }
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

} // namespace ehelf::synth
