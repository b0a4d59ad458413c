// What the synthesizer knows between the explorations of functions: the discovery
// (discovery.hpp) as the explorations extend it (the starts they find, the functions called at
// their start, the jumps into parts split off, the code addresses taken), the facts each
// exploration reads (landing pads, noreturn functions and the evidence for them), the frame
// states met so far (each kept once) and the result being built. The exploration of one
// function (explore.hpp) reads and extends it; the phases around it (synthesizer.cpp) decide what
// is explored, and when again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "elf/elf_file.hpp"
#include "support/result.hpp"
#include "synth/discovery.hpp"
#include "synth/frame_state.hpp"
#include "synth/synthesizer.hpp"
#include "x86/decoder.hpp"

namespace ehelf::synth {

// How a function can end, for the inference of noreturn functions: returning (ret, an
// unresolved indirect jump, a path lost, a jump into another function's body), else only by its
// tail calls; and the calls whose next instruction it went on to.
struct Exits {
  bool returns = false;
  std::vector<uint64_t> tail_calls, calls;
};

struct Knowledge : Discovery {
  Knowledge(const ElfFile& file, Discovery discovered)
      : Discovery(std::move(discovered)), elf(file) {}
  const ElfFile& elf;
  x86::Decoder decoder;
  // The instruction starts of a linear sweep of a weak start's code (up to its FDE's end), for
  // the test of a part split off (explore.cpp), made once per start.
  std::unordered_map<uint64_t, std::vector<uint64_t>> part_sweeps;
  // Weak start -> the jumps into it with the frame in place: where, and the state there.
  std::map<uint64_t, std::vector<std::pair<uint64_t, FrameState>>> jumped_in;
  std::map<uint64_t, size_t> entries_used; // weak start -> jumped_in entries its analysis used
  // Weak starts a call or a tail call enters at their start: functions, whose own cold parts
  // may jump back into their body, not parts entered only by jumps; and the weak starts
  // analysed from their jumps alone.
  std::set<uint64_t> called, start_skipped;
  // Callees of another file whose next instruction a conflict says is dead: the calls saying so.
  std::map<uint64_t, std::set<uint64_t>> noreturn_evidence;
  std::set<uint64_t> indirect_jumps; // each counted once in the statistics
  // The exception edges read from the LSDAs: call -> the landing pads an exception it throws
  // lands on. An analysis that reaches the call goes on at each pad in the state after the call,
  // so a re-analysis from another entry state (a cold part entered by a jump found later) moves
  // its pads with it.
  std::map<uint64_t, std::vector<uint64_t>> landing_pads;
  SynthResult result;
  std::unordered_map<FrameState, uint32_t, FrameStateHash> state_ids; // into result.states
  // What one file may cost: 24 bytes an analysed instruction, and while a function is analysed
  // about 100 more for each of its instructions. Real files stay far below: libLLVM-14 (50 MB of
  // code) has about 11 million instructions, the largest functions a few hundred thousand.
  static constexpr size_t kMaxFunctionInstructions = size_t(1) << 21;
  static constexpr size_t kMaxInstructions = size_t(1) << 25;
  std::optional<Error> refused; // set when a bound is reached: no result then

  // The index of `s` in result.states (added if it is new).
  uint32_t intern(const FrameState& s) {
    auto [it, fresh] = state_ids.try_emplace(s, uint32_t(result.states.size()));
    if (fresh) result.states.push_back(s);
    return it->second;
  }
};

} // namespace ehelf::synth
