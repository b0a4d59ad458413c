// What a file's FDEs told C++ exception handling, carried into the synthesized table: the
// personality routine (through its pointer slot) and each function's LSDA in .gcc_except_table.
// With the file's own table they are copied from its FDEs; without (tables stripped), the LSDAs
// are parsed from .gcc_except_table and each is matched to the one function whose code fits its
// call-site table (every region ends right after a call, no landing pad falls inside another
// instruction), and the personality slot is the data word the loader binds to
// __gxx_personality_v0 (or __gcc_personality_v0). The landing pads, which no jump reaches, are
// what the synthesizer then analyses.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"
#include "synth/synthesizer.hpp"
#include "x86/decoder.hpp"

namespace ehelf::synth {

struct LandingPad {
  uint32_t function = 0; // into SynthResult::functions
  uint64_t pad = 0;      // where an exception thrown by the call lands
  uint64_t call = 0;     // the call (the last one of its call-site region)
};

class ExceptionTables {
public:
  // `shipped`: the file's own table, if it has FDEs.
  ExceptionTables(const ElfFile& elf, const UnwindTable* shipped);

  // Gives the parts of `result`'s functions their LSDA (from the shipped FDEs, or matched; parts
  // already holding one keep it) and returns the landing pads of every part with one.
  std::vector<LandingPad> match(SynthResult& result);

  uint64_t personality_slot() const { return personality_slot_; }
  uint64_t personality() const { return personality_; }
  uint64_t found() const { return lsdas_.size(); }
  uint64_t matched() const { return assigned_.size(); }

private:
  struct CallSite {
    uint64_t start = 0, length = 0, landing_pad = 0;
  };
  struct Lsda {
    uint64_t address = 0;
    std::vector<CallSite> sites;
  };
  // A part's code as a linear sweep decodes it: instruction starts and call ends, as offsets.
  struct Sweep {
    std::vector<uint32_t> starts, call_ends; // ascending
    uint64_t span = 0;                       // bytes swept from the start (at most)
  };
  const Sweep& sweep(const SynthFunction::Part& p);
  static bool fits_code(const Lsda& l, const Sweep& sw, const Sweep* head = nullptr,
                        uint32_t head_base = 0);
  Sweep head_sweep(uint64_t begin, uint64_t part_begin) const;
  uint64_t linear_sweep(std::span<const uint8_t> code, uint64_t address, uint64_t limit,
                        Sweep& sw) const;
  static size_t pad_sites(const Lsda& l);
  std::span<const uint8_t> code_at(uint64_t address, uint64_t size) const; // up to size bytes
  const Lsda* lsda_at(uint64_t address) const;
  bool is_call(uint64_t address) const;
  bool nop_before_first_pad(const Lsda& l, uint64_t begin) const;
  bool fits(const SynthResult& r, const Lsda& l, uint32_t fn, const SynthFunction::Part& p) const;
  static std::optional<std::pair<Lsda, size_t>> parse_one(std::span<const uint8_t> data, size_t pos,
                                                          uint64_t addr);
  static std::vector<Lsda> parse(std::span<const uint8_t> data, uint64_t addr);

  // The steps of match().
  // A part of `result` an LSDA fits: from `begin`, its start or up to kMaxHead bytes before it.
  struct Candidate {
    uint32_t fn;
    SynthFunction::Part* part;
    uint64_t begin;
  };
  // Gives each part the LSDA of the shipped FDE that starts where it does.
  void assign_shipped(SynthResult& result);
  // Indexes the LSDAs with a landing pad by the end of their first region with one (once).
  void index_by_first_pad_end();
  // Every free part each LSDA fits, by LSDA index.
  std::map<uint32_t, std::vector<Candidate>> fitting_parts(SynthResult& result);
  // Gives each LSDA the one part it fits (in order among the matched ones, when its shape is
  // common), rounds until nothing changes.
  void assign_fitting(SynthResult& result, std::map<uint32_t, std::vector<Candidate>> fitting);
  // The landing pads of every part holding an LSDA, with the call each belongs to.
  std::vector<LandingPad> landing_pads(const SynthResult& result) const;

  const ElfFile& elf_;
  const UnwindTable* shipped_;
  std::vector<Lsda> lsdas_; // by address
  std::set<uint64_t> assigned_;
  // Matched LSDAs (stripped files): LSDA address -> its part's start, for first parts [0] and
  // split-off parts [1].
  std::map<uint64_t, uint64_t> anchors_[2];
  uint64_t personality_slot_ = 0, personality_ = 0;
  x86::Decoder decoder_;
  std::map<uint64_t, Sweep> sweeps_; // by the part's start
  // Parts (by start) no free LSDA fitted, with what they were then (function, its analysed
  // instructions, extent).
  std::unordered_map<uint64_t, uint64_t> barren_;
  // LSDAs with a landing pad (indices into lsdas_) by the end of their first region with one,
  // and the furthest offset any LSDA names.
  std::map<uint64_t, std::vector<uint32_t>> by_first_pad_end_;
  bool by_first_pad_end_built_ = false;
  uint64_t max_extent_ = 0;
};

} // namespace ehelf::synth
