// The synthesizer's last phase: the unwind table of its analyses, one FDE per function part and
// a row per analysed instruction (the row its state gives: frame_state.hpp's state_row).
#pragma once

#include "model/unwind_table.hpp"
#include "synth/synthesizer.hpp"

namespace ehelf::synth {

// The table of `result`'s functions and instructions (its `table` member is not read).
UnwindTable assemble_table(const SynthResult& result);

} // namespace ehelf::synth
