// The exploration of one function: from its entry (or, for a part split off a function, from the
// jumps into it), every path the x86 layer decodes, with the frame state before each instruction
// (frame_state.hpp); where two paths meet in different frames, a conflict. What it finds of other
// functions (call targets become starts, tail calls, jumps into parts split off, code addresses
// taken, evidence of noreturn callees) extends the knowledge (knowledge.hpp) as it goes, since
// the rest of the same exploration reads it; what it finds of this function is its result.
#pragma once

#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

#include "synth/knowledge.hpp"
#include "synth/synthesizer.hpp"
#include "x86/instruction.hpp"

namespace ehelf::synth {

// What an exploration keeps of each instruction it reached: the state before it (an index into
// result.states) and what the conflict check needs of the instruction.
struct Seen {
  uint32_t state;
  uint8_t length;
  x86::Flow flow;
  uint64_t target;
};

struct FunctionAnalysis {
  SynthFunction function; // its parts too (those found now are added to those given)
  std::unordered_map<uint64_t, Seen> seen; // instruction address -> what was seen there
  Exits exits;
  std::vector<Conflict> conflicts;
};

// Explores the function starting at `start`, whose parts, if it was explored before, are
// `parts` (else none: its own extent). Paths through the addresses in `blocked` (misdecodes
// found before) are not taken. When a bound is reached, `k.refused` is set and the analysis is
// not to be used.
FunctionAnalysis explore_function(Knowledge& k, uint64_t start,
                                  const std::vector<SynthFunction::Part>* parts,
                                  const std::set<uint64_t>& blocked);

// The instructions of an exploration that start inside another one it decoded, unless both end
// at the same byte in the same frame (a jump over a prefix, as glibc's `lock` skips): a path
// that entered an instruction's middle.
std::vector<uint64_t> overlapping_decodes(const Knowledge& k,
                                          const std::unordered_map<uint64_t, Seen>& seen);

} // namespace ehelf::synth
