#include "synth/synthesizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "synth/assemble.hpp"
#include "synth/discovery.hpp"
#include "synth/exception_tables.hpp"
#include "synth/explore.hpp"
#include "synth/knowledge.hpp"
#include "synth/late_starts.hpp"

namespace ehelf::synth {

namespace {

// The phases between discovery (discovery.hpp) and the table (assemble.hpp): each function
// explored from its entry (analyse), cold parts entered by jumps, landing pads, noreturn
// functions inferred to a fixed point, and rounds of starts found late (late_starts.hpp). Each
// function is explored by explore.hpp; what the explorations learn of the file is the base
// (knowledge.hpp).
struct Synthesizer : Knowledge {
  Synthesizer(const ElfFile& file, Discovery discovered) : Knowledge(file, std::move(discovered)) {}
  // How each analysed function (by SynthResult::functions index) can end.
  std::vector<Exits> exits;
  std::set<uint64_t> analysed;
  // Per function start: addresses inside another instruction of that function that a path
  // decoded as an instruction of its own (a jump into an instruction's middle, from a misread
  // jump table or a word of data taken for a label), whose paths the analysis no longer takes.
  std::map<uint64_t, std::set<uint64_t>> misdecoded;
  std::map<uint64_t, uint32_t> index_of; // analysed start -> its SynthResult::functions index

  // Explores the function at `start` (explore.hpp) and records its analysis: its instructions,
  // conflicts and exits. `replace`: the index of an earlier analysis of this function, redone
  // (with the landing pads and entry states found since). An exploration whose paths decoded
  // overlapping instructions is done again without the misdecoded ones (the one starting inside
  // the other: its states reach the real instructions it runs into), a bounded number of times.
  void analyse(uint64_t start, std::optional<uint32_t> replace = std::nullopt) {
    analysed.insert(start);
    if (refused) return;
    const uint32_t index = replace ? *replace : static_cast<uint32_t>(result.functions.size());
    index_of[start] = index;
    std::optional<std::vector<SynthFunction::Part>> parts;
    if (replace) parts = result.functions[*replace].parts;
    for (;;) {
      FunctionAnalysis a =
          explore_function(*this, start, parts ? &*parts : nullptr, misdecoded[start]);
      if (refused) return;
      constexpr size_t kMaxMisdecodes = 64;
      if (std::set<uint64_t>& known = misdecoded[start]; known.size() < kMaxMisdecodes) {
        bool found = false;
        for (uint64_t m : overlapping_decodes(*this, a.seen))
          found |= known.size() < kMaxMisdecodes && known.insert(m).second;
        if (found) {
          parts = std::move(a.function.parts);
          continue;
        }
      }
      a.function.instructions = a.seen.size();
      if (result.instructions.size() + a.seen.size() > kMaxInstructions) {
        refused = Error::plain(fmt::format("more than {} instructions to analyse (a bound on the "
                                           "synthesizer's memory)",
                                           kMaxInstructions));
        return;
      }
      for (auto& [address, seen] : a.seen)
        result.instructions.push_back({address, seen.length, index, seen.state});
      result.conflicts.insert(result.conflicts.end(), a.conflicts.begin(), a.conflicts.end());
      if (exits.size() <= index) exits.resize(index + 1);
      exits[index] = std::move(a.exits);
      if (index < result.functions.size())
        result.functions[index] = std::move(a.function);
      else
        result.functions.push_back(std::move(a.function));
      return;
    }
  }

  void analyse_new_starts() {
    // Functions known from symbols, calls and the entry first: their jumps tell which weak
    // starts are cold parts.
    for (bool weak_pass = false;;) {
      std::vector<uint64_t> todo;
      for (const auto& [a, name] : names)
        if (!analysed.count(a) && !cold.count(a) && weak.count(a) == weak_pass) todo.push_back(a);
      if (todo.empty() && weak_pass) break;
      weak_pass = todo.empty();
      for (uint64_t a : todo)
        analyse(a);
    }
  }

  // Analyses append to the sorted instructions: the new ones are sorted and merged in (a full
  // sort of a large program's million instructions per round took most of the time).
  void sort_instructions() {
    auto by_address = [](const AnalysedInstruction& x, const AnalysedInstruction& y) {
      return x.address < y.address;
    };
    auto& v = result.instructions;
    auto tail = std::is_sorted_until(v.begin(), v.end(), by_address);
    std::sort(tail, v.end(), by_address);
    std::inplace_merge(v.begin(), tail, v.end(), by_address);
  }

  // Analyses the functions `indices` names again.
  void reanalyse(const std::set<uint32_t>& indices) {
    if (indices.empty()) return;
    std::erase_if(result.instructions,
                  [&](const AnalysedInstruction& in) { return indices.count(in.function) != 0; });
    std::set<std::string> names_again;
    for (uint32_t i : indices)
      names_again.insert(result.functions[i].name);
    std::erase_if(result.conflicts,
                  [&](const Conflict& c) { return names_again.count(c.function) != 0; });
    for (uint32_t index : indices)
      analyse(result.functions[index].begin, index);
  }

  // A part's end was the next start known when it was found; starts found since end it sooner.
  void refresh_extents() {
    for (SynthFunction& f : result.functions)
      for (SynthFunction::Part& p : f.parts)
        if (auto n = names.upper_bound(p.begin); n != names.end())
          p.end = std::min(p.end, n->first);
  }

  // Landing pads are reached by no jump: each function that reaches a call whose exception
  // tables name a pad is analysed again with the exception edge (its cold parts, entered from
  // pads, may bring tables of their own, and a cold part entered by a jump found in a pad is
  // analysed again from that jump's state, its pads with it: rounds until nothing changes).
  void analyse_landing_pads() {
    ExceptionTables& tables = *exception_tables;
    constexpr int kMaxRounds = 16; // each round needs a newly found pad or entry; real files: < 6
    for (int round = 0; round < kMaxRounds; ++round) {
      std::set<uint32_t> again;
      refresh_extents();
      for (const LandingPad& lp : tables.match(result)) {
        std::vector<uint64_t>& pads = landing_pads[lp.call];
        if (std::find(pads.begin(), pads.end(), lp.pad) != pads.end()) continue;
        pads.push_back(lp.pad);
        auto it = std::lower_bound(
            result.instructions.begin(), result.instructions.end(), lp.call,
            [](const AnalysedInstruction& in, uint64_t v) { return in.address < v; });
        if (it != result.instructions.end() && it->address == lp.call) again.insert(it->function);
      }
      // Cold parts known only from FDEs, analysed before from an entry state, entered by a jump
      // found since (from a landing pad, or from a function analysed after them): again, from
      // the state of that jump.
      for (const auto& [start, entries] : jumped_in)
        if (weak.count(start) && index_of.count(start) &&
            (entries_used[start] < entries.size() ||
             (start_skipped.count(start) && called.count(start))))
          again.insert(index_of[start]);
      if (again.empty()) break;
      reanalyse(again);
      analyse_new_starts();
      sort_instructions();
    }
    result.personality_slot = tables.personality_slot();
    result.personality = tables.personality();
    result.lsdas_found = tables.found();
    result.lsdas_matched = tables.matched();
  }

  // A part found by a jump extends to the next known start; its FDE ends after the last
  // instruction analysed in it (what follows may be other code, of a function never found).
  void trim_jumped_parts() {
    std::map<const SynthFunction::Part*, uint64_t> last_end;
    for (const AnalysedInstruction& in : result.instructions)
      for (const SynthFunction::Part& p : result.functions[in.function].parts)
        if (p.by_jump && in.address >= p.begin && in.address < p.end) {
          uint64_t& e = last_end[&p];
          e = std::max(e, in.address + in.length);
        }
    for (SynthFunction& f : result.functions)
      for (SynthFunction::Part& p : f.parts)
        if (p.by_jump) p.end = std::max(p.begin, last_end[&p]);
  }

  // Noreturn functions the code shows (every path ends in a call or tail call to a noreturn
  // function, ud2 or hlt), to a fixed point: the callers that went on after a call to one are
  // analysed again without that path, which may make them noreturn in turn. False when none
  // was found.
  bool infer_noreturn() {
    // Each round finds at least one more (a chain of functions each ending in a call to the
    // next takes one round per link; real files: fewer than 10 rounds), so there are at most as
    // many rounds as functions; a round costs what its candidates and re-analyses cost. The
    // instructions the re-analyses replace are dropped, and the new ones sorted in, once at the
    // end.
    std::unordered_map<uint64_t, std::vector<uint32_t>> callers_of, tail_callers_of;
    auto index_exits = [&](uint32_t i) {
      for (uint64_t t : exits[i].calls)
        callers_of[t].push_back(i);
      for (uint64_t t : exits[i].tail_calls)
        tail_callers_of[t].push_back(i);
    };
    std::vector<uint32_t> candidates;
    for (uint32_t i = 0; i < result.functions.size() && i < exits.size(); ++i) {
      index_exits(i);
      candidates.push_back(i);
    }
    const size_t sorted_end = result.instructions.size();
    std::vector<bool> replaced(result.functions.size());            // its sorted instructions go
    std::unordered_map<uint32_t, std::pair<size_t, size_t>> latest; // its re-analysis's block
    std::vector<std::pair<size_t, size_t>> superseded;              // blocks analysed again
    bool found_any = false;
    for (size_t round = 0; round <= result.functions.size(); ++round) {
      std::set<uint64_t> found;
      for (const auto& [f, calls] : noreturn_evidence)
        if (calls.size() >= 2 && !noreturn.count(f)) found.insert(f);
      for (uint32_t i : candidates) {
        const SynthFunction& f = result.functions[i];
        const Exits& e = exits[i];
        if (f.outermost || noreturn.count(f.begin) || e.returns) continue;
        if (std::all_of(e.tail_calls.begin(), e.tail_calls.end(),
                        [&](uint64_t t) { return noreturn.count(t) != 0; }))
          found.insert(f.begin);
      }
      if (found.empty()) break;
      for (uint64_t f : std::set<uint64_t>(found))
        if (auto p = plt_to_local.find(f); p != plt_to_local.end())
          found.insert(p->second.begin(), p->second.end());
      found_any = true;
      noreturn.insert(found.begin(), found.end());
      std::set<uint32_t> callers, next;
      for (uint64_t f : found) {
        if (auto c = callers_of.find(f); c != callers_of.end())
          callers.insert(c->second.begin(), c->second.end());
        if (auto t = tail_callers_of.find(f); t != tail_callers_of.end())
          next.insert(t->second.begin(), t->second.end());
      }
      std::set<std::string> names_again;
      for (uint32_t i : callers)
        names_again.insert(result.functions[i].name);
      std::erase_if(result.conflicts,
                    [&](const Conflict& c) { return names_again.count(c.function) != 0; });
      for (uint32_t i : callers) {
        if (auto l = latest.find(i); l != latest.end())
          superseded.push_back(l->second);
        else if (i < replaced.size())
          replaced[i] = true;
        const size_t begin = result.instructions.size();
        analyse(result.functions[i].begin, i);
        latest[i] = {begin, result.instructions.size()};
        index_exits(i);
        next.insert(i);
      }
      candidates.assign(next.begin(), next.end());
    }
    if (!found_any) return false;
    // Drop the instructions the re-analyses replaced: their functions' in the sorted part, and
    // the blocks of re-analyses done again.
    std::vector<bool> dead(result.instructions.size() - sorted_end);
    for (const auto& [b, e] : superseded)
      for (size_t k = b; k < e; ++k)
        dead[k - sorted_end] = true;
    size_t out = 0;
    for (size_t k = 0; k < result.instructions.size(); ++k) {
      const AnalysedInstruction& in = result.instructions[k];
      const bool gone = k < sorted_end ? in.function < replaced.size() && replaced[in.function]
                                       : bool(dead[k - sorted_end]);
      if (!gone) result.instructions[out++] = in;
    }
    result.instructions.resize(out);
    sort_instructions();
    return true;
  }

  // New starts (late_starts.hpp): false when there is none.
  bool add_starts(const std::vector<uint64_t>& starts) {
    for (uint64_t a : starts)
      add_start(a, "");
    return !starts.empty();
  }
  bool add_address_taken_starts() {
    const bool added = add_starts(unreached_address_taken(*this, result));
    address_taken.clear(); // each is decided once: reached by an analysis, or a start
    return added;
  }
  bool add_prologue_starts() { return add_starts(prologue_starts(*this, result, decoder)); }

  std::optional<ExceptionTables> exception_tables;

  void run() {
    result.text_bytes = text_bytes;
    exception_tables.emplace(elf, shipped);
    // Rounds of discovery, each with something new (noreturn functions, address-taken or
    // prologue starts); bounded for hostile files (gdb without tables takes 9).
    constexpr int kMaxDiscoveryRounds = 64;
    for (int round = 0; round < kMaxDiscoveryRounds && !refused; ++round) {
      analyse_new_starts();
      sort_instructions();
      analyse_landing_pads();
      if (!infer_noreturn() && !add_address_taken_starts() && !add_prologue_starts()) break;
    }
    if (refused) return;
    refresh_extents();
    trim_jumped_parts();
    result.table = assemble_table(result);
  }
};

} // namespace

const SynthFunction::Part& SynthFunction::part_of(uint64_t address) const {
  for (const Part& p : parts)
    if (address >= p.begin && address < p.end) return p;
  return parts.front();
}

const SynthFunction* function_at(const SynthResult& result, uint64_t address) {
  for (const SynthFunction& f : result.functions)
    for (const SynthFunction::Part& p : f.parts)
      if (address >= p.begin && address < p.end) return &f;
  return nullptr;
}

Result<SynthResult> synthesize(const ElfFile& elf, const UnwindTable* shipped) {
  // A file stripped of its tables may still load as a table without functions: that is no
  // table (with one, the FDEs name every function and the prologue scan is skipped).
  if (shipped && shipped->function_count() == 0) shipped = nullptr;
  Synthesizer s(elf, discover(elf, shipped));
  s.run();
  if (s.refused) return std::move(*s.refused).in_file(elf.name());
  if (s.code.empty()) return Error::plain("no executable section").in_file(elf.name());
  return std::move(s.result);
}

} // namespace ehelf::synth
