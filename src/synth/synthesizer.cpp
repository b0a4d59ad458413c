#include "synth/synthesizer.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "model/registers.hpp"
#include "synth/assemble.hpp"
#include "synth/discovery.hpp"
#include "synth/exception_tables.hpp"
#include "synth/late_starts.hpp"
#include "x86/abi.hpp"
#include "x86/decoder.hpp"
#include "x86/jump_table.hpp"

namespace ehelf::synth {

namespace {

using x86::Reg;

// The phases between discovery (discovery.hpp) and the table (assemble.hpp): each function
// explored from its entry (analyse), cold parts entered by jumps, landing pads, noreturn
// functions inferred to a fixed point, and rounds of starts found late (late_starts.hpp). The
// starts and facts discovered are extended as they go (the base).
struct Synthesizer : Discovery {
  Synthesizer(const ElfFile& file, Discovery discovered)
      : Discovery(std::move(discovered)), elf(file) {}
  const ElfFile& elf;
  x86::Decoder decoder;
  // The instruction starts of a linear sweep of a weak start's code (up to its FDE's end), for
  // split_off_part, made once per start.
  std::unordered_map<uint64_t, std::vector<uint64_t>> part_sweeps;
  std::map<uint64_t, std::vector<std::pair<uint64_t, FrameState>>> jumped_in;
  std::map<uint64_t, size_t> entries_used; // weak start -> jumped_in entries its analysis used
  // Weak starts a call or a tail call enters at their start: functions, whose own cold parts
  // may jump back into their body, not parts entered only by jumps; and the weak starts
  // analysed from their jumps alone.
  std::set<uint64_t> called, start_skipped;
  // How each analysed function (by SynthResult::functions index) can end, for the inference of
  // noreturn functions: returning (ret, an unresolved indirect jump, a path lost, a jump into
  // another function's body), else only by its tail calls; and the calls whose next
  // instruction it went on to.
  struct Exits {
    bool returns = false;
    std::vector<uint64_t> tail_calls, calls;
  };
  std::vector<Exits> exits;
  // Callees of another file whose next instruction a conflict says is dead: the calls saying so.
  std::map<uint64_t, std::set<uint64_t>> noreturn_evidence;
  std::set<uint64_t> analysed;
  // Per function start: addresses inside another instruction of that function that a path
  // decoded as an instruction of its own (a jump into an instruction's middle, from a misread
  // jump table or a word of data taken for a label), whose paths the analysis no longer takes.
  std::map<uint64_t, std::set<uint64_t>> misdecoded;
  std::map<uint64_t, uint32_t> index_of; // analysed start -> its SynthResult::functions index
  std::set<uint64_t> indirect_jumps;     // each counted once in the statistics
  // The exception edges read from the LSDAs: call -> the landing pads an exception it throws
  // lands on. An analysis that reaches the call goes on at each pad in the state after the call,
  // so a re-analysis from another entry state (a cold part entered by a jump found later) moves
  // its pads with it.
  std::map<uint64_t, std::vector<uint64_t>> landing_pads;
  SynthResult result;

  // Whether a switch's target `a` outside its function lies in a part split off a function (its
  // cold cases): a .cold part, or in a stripped file code whose start is known only from an FDE,
  // that nothing calls and that opens no frame at its start (a part begins mid-flow), `a` on an
  // instruction boundary from that start. A table whose bound the recogniser misread (entries
  // past the real table) reaches into the functions after it: those are called or open frames,
  // and its targets fall anywhere in an instruction. (Whether the part's address is taken says
  // nothing: a non-PIE file's tables of absolute addresses make every case a code pointer.)
  bool split_off_part(uint64_t a) {
    if (cold_part_of(a)) return true;
    const uint64_t holder = names.count(a) ? a : known_function_holding(a);
    if (!holder || !weak.count(holder) || called.count(holder)) return false;
    const CodeSection* c = section_of(holder);
    if (!c || a >= c->end || opens_frame(decoder, *c, holder, c->end)) return false;
    auto [sweep, fresh] = part_sweeps.try_emplace(holder);
    if (fresh) { // once per part (a hostile file's tables may ask for each of 65,536 entries)
      constexpr size_t kMaxInstructions = 4096;
      const uint64_t end = std::min(c->end, stated_end(holder));
      std::vector<uint64_t>& starts = sweep->second;
      decoder.sweep(c->bytes.subspan(holder - c->begin, end - holder), holder,
                    [&](const x86::Instruction&, uint64_t off) {
                      if (starts.size() == kMaxInstructions) return false;
                      starts.push_back(holder + off);
                      return true;
                    });
    }
    return std::binary_search(sweep->second.begin(), sweep->second.end(), a);
  }

  // Whether the call at `call` to `target` is one of those with a status other than 0 in edi,
  // set by a `mov $imm` on the path to it (followed back through `predecessor`, a few steps).
  bool exits_with_status(uint64_t target, uint64_t call,
                         const std::unordered_map<uint64_t, uint64_t>& predecessor) const {
    if (!exit_if_status.count(target)) return false;
    uint64_t a = call;
    for (int steps = 0; steps < 8; ++steps) {
      auto p = predecessor.find(a);
      if (p == predecessor.end() || !p->second) return false;
      a = p->second;
      const CodeSection* c = section_of(a);
      if (!c) return false;
      auto in = decoder.decode(c->bytes.subspan(a - c->begin), a);
      if (!in) return false;
      if (in->value_register == x86::Reg::rdi && in->address_value_immediate)
        return in->address_value != 0;
      if (in->writes_reg(x86::Reg::rdi) || in->flow != x86::Flow::next) return false;
    }
    return false;
  }

  // The targets of the switch dispatch at `jump` (x86/jump_table.hpp), read from the file; none
  // when the jump is no recognised dispatch, its table is not in the file or one of its first
  // `entries` targets lies outside the function and its parts (a split-off part known from the
  // file's FDEs counts as one: a switch's cold cases). A target right at the end of the
  // function's code is an empty, unreachable case: not followed.
  template <typename Inside>
  std::vector<uint64_t>
  jump_table_targets(uint64_t jump, const std::unordered_map<uint64_t, uint64_t>& predecessor,
                     uint64_t function_start, const Inside& inside) {
    constexpr size_t kPathLength = 24;
    std::vector<x86::PathInstruction> path;
    for (uint64_t a = jump; path.size() < kPathLength;) {
      const CodeSection* c = section_of(a);
      if (!c) break;
      path.push_back({a, c->bytes.subspan(a - c->begin)});
      auto p = predecessor.find(a);
      if (a == function_start || p == predecessor.end() || !p->second) break;
      a = p->second;
    }
    std::reverse(path.begin(), path.end());
    std::vector<uint64_t> targets;
    const auto table = x86::recognise_jump_table(path);
    const bool first_visit = indirect_jumps.insert(jump).second;
    if (!table) {
      result.unresolved_indirect_jumps += first_visit;
      return targets;
    }
    const auto bytes = data_at(table->table, uint64_t(table->entries) * table->entry_size);
    if (bytes.empty()) return targets;
    for (uint32_t i = 0; i < table->entries; ++i) {
      const uint8_t* e = bytes.data() + size_t(i) * table->entry_size;
      uint64_t to;
      if (table->entry_size == 4) {
        int32_t v;
        std::memcpy(&v, e, 4);
        to = table->base + uint64_t(int64_t(v));
      } else
        std::memcpy(&to, e, 8);
      if (!inside(to)) {
        // A case clang left empty (unreachable: its label is where the function's code ends).
        if (to > 0 && inside(to - 1)) continue;
        if (!split_off_part(to)) return {};
      }
      if (std::find(targets.begin(), targets.end(), to) == targets.end()) targets.push_back(to);
    }
    result.jump_tables += first_visit;
    return targets;
  }

  // `size` bytes at `address` in an allocated section of the file, or nothing.
  std::span<const uint8_t> data_at(uint64_t address, uint64_t size) const {
    for (const Section& s : elf.sections())
      if ((s.flags & SHF_ALLOC) && s.type != SHT_NOBITS && address >= s.addr &&
          address - s.addr <= s.size && size <= s.size - (address - s.addr))
        if (auto d = elf.section_data(s); d && address - s.addr + size <= d->size())
          return d->subspan(address - s.addr, size);
    return {};
  }

  // What an analysis keeps of each instruction it reached: the state before it (an index into
  // result.states) and what the conflict check needs of the instruction.
  struct Seen {
    uint32_t state;
    uint8_t length;
    x86::Flow flow;
    uint64_t target;
  };
  std::unordered_map<FrameState, uint32_t, FrameStateHash> state_ids;
  // What one file may cost: 24 bytes an analysed instruction, and while a function is analysed
  // about 100 more for each of its instructions. Real files stay far below: libLLVM-14 (50 MB of
  // code) has about 11 million instructions, the largest functions a few hundred thousand.
  static constexpr size_t kMaxFunctionInstructions = size_t(1) << 21;
  static constexpr size_t kMaxInstructions = size_t(1) << 25;
  std::optional<Error> refused; // set when a bound is reached: no result then
  uint32_t intern(const FrameState& s) {
    auto [it, fresh] = state_ids.try_emplace(s, uint32_t(result.states.size()));
    if (fresh) result.states.push_back(s);
    return it->second;
  }

  // The instructions of one analysis that start inside another one it decoded, unless both end
  // at the same byte in the same frame (a jump over a prefix, as glibc's `lock` skips): a path
  // that entered an instruction's middle.
  std::vector<uint64_t> overlapping_decodes(const std::unordered_map<uint64_t, Seen>& seen) const {
    std::vector<uint64_t> starts;
    starts.reserve(seen.size());
    for (const auto& [a, si] : seen)
      starts.push_back(a);
    std::sort(starts.begin(), starts.end());
    std::vector<uint64_t> inner;
    uint64_t outer = 0, outer_end = 0;
    for (uint64_t a : starts) {
      const Seen& here = seen.at(a);
      const uint64_t end = a + here.length;
      if (a < outer_end) {
        if (end != outer_end ||
            !same_frame(result.states[here.state], result.states[seen.at(outer).state]))
          inner.push_back(a);
        continue;
      }
      outer = a;
      outer_end = end;
    }
    return inner;
  }

  // Explores one function from its entry. New call targets become function starts.
  // `replace`: the index of an earlier analysis of this function, redone (with the landing pads
  // and entry states found since).
  void analyse(uint64_t start, std::optional<uint32_t> replace = std::nullopt) {
    analysed.insert(start);
    if (refused) return;
    const uint32_t index = replace ? *replace : static_cast<uint32_t>(result.functions.size());
    SynthFunction fn{names[start], start, extent_end(start), 0, start == entry, {}, {}};
    fn.parts.push_back({fn.begin, fn.end, 0});
    if (replace) // the parts found before, with their exception tables
      fn.parts = result.functions[*replace].parts;
    auto inside = [&](uint64_t a) {
      for (const SynthFunction::Part& p : fn.parts)
        if (a >= p.begin && a < p.end) return true;
      return false;
    };
    std::unordered_map<uint64_t, Seen> seen;
    FrameState initial;
    index_of[start] = index;
    // Each work item: where to go, the state there, and where from (for the jump tables' paths).
    struct Step {
      uint64_t to;
      FrameState state;
      uint64_t from;
    };
    std::vector<Step> work = {{start, initial, 0}};
    start_skipped.erase(start);
    if (auto j = jumped_in.find(start); j != jumped_in.end() && weak.count(start)) {
      // A function called at its start, or whose start opens a frame and is reached by no jump
      // with a frame in place (one called only through pointers: a part split off begins
      // mid-flow, maybe with a `sub` for a call's arguments), is entered there as any function;
      // jumps into its middle (from its own cold part) bring their states.
      const CodeSection* c = section_of(start);
      const bool jumped_to_start = std::any_of(j->second.begin(), j->second.end(),
                                               [&](const auto& e) { return e.first == start; });
      const bool function =
          called.count(start) || (!jumped_to_start && c && opens_frame(decoder, *c, start, c->end));
      if (!function) {
        work.clear();
        start_skipped.insert(start);
      }
      for (const auto& [to, state] : j->second)
        if (to != start || !function) work.push_back({to, state, 0});
      entries_used[start] = j->second.size();
    }
    std::unordered_map<uint64_t, uint64_t> predecessor; // on the first path that reached it
    std::set<uint64_t> reported;
    Exits ends;
    auto fail = [&](std::string why) {
      ends.returns = true;
      if (fn.failure.empty()) fn.failure = std::move(why);
    };
    // Indirect jumps that are no switch: the states they leave with, for the labels in this
    // function whose address the code takes (found before or after the jump).
    std::vector<std::pair<uint64_t, FrameState>> computed_jumps;
    std::set<uint64_t> labels_followed;
    // Whether `a` falls inside (not at the start of) an instruction analysed already: a word of
    // data that only looks like a label.
    auto inside_seen = [&](uint64_t a) {
      for (uint64_t k = 1; k < 15 && k <= a; ++k)
        if (auto it = seen.find(a - k); it != seen.end()) return it->second.length > k;
      return false;
    };
    // The labels are entered in the state most of the computed jumps leave with (a dispatch
    // loop's frame; a stray one with a temporary push would otherwise make conflicts).
    auto follow_labels = [&] {
      constexpr size_t kMaxVoters = 256; // bounds the vote (quadratic) on hostile code
      const size_t voters = std::min(computed_jumps.size(), kMaxVoters);
      size_t best = 0, votes = 0;
      for (size_t i = 0; i < voters; ++i) {
        const size_t n = std::count_if(
            computed_jumps.begin(), computed_jumps.begin() + voters,
            [&](const auto& j) { return same_frame(j.second, computed_jumps[i].second); });
        if (n > votes) votes = n, best = i;
      }
      const auto& [jump, state] = computed_jumps[best];
      for (const SynthFunction::Part& p : fn.parts)
        for (auto l = code_pointers.lower_bound(p.begin);
             l != code_pointers.end() && *l < stated_end(p.begin); ++l)
          // (The function's own start is its address as a function pointer, no label.)
          if (!names.count(*l) && labels_followed.insert(*l).second && !inside_seen(*l))
            work.push_back({*l, state, jump});
    };
    const std::set<uint64_t>& blocked = misdecoded[start];
    const size_t conflicts_before = result.conflicts.size();
    while (!work.empty() || (!computed_jumps.empty() && (follow_labels(), !work.empty()))) {
      auto [a, s, from] = work.back();
      work.pop_back();
      if (blocked.count(a)) continue; // a path through a misdecode: taken by no real execution
      if (auto it = seen.find(a); it != seen.end()) {
        const FrameState old = result.states[it->second.state];
        if (!same_frame(old, s)) {
          // A call through the PLT to another file whose next instruction another path reaches
          // in another state: the callee does not return (perl's modules call libperl's
          // Perl_croak; this file's own functions are inferred from their code instead).
          const uint64_t meeting = a; // clang 14 cannot capture a structured binding
          auto call_before = [&](uint64_t p) -> const Seen* {
            auto c = seen.find(p);
            if (c == seen.end()) return nullptr;
            const Seen& in = c->second;
            return in.flow == x86::Flow::call && p + in.length == meeting &&
                           !section_of(in.target) && !plt_local_entries.count(in.target)
                       ? &in
                       : nullptr;
          };
          // Only when the path after the call is the deeper one (arguments pushed for it that
          // no code pops), seen at two calls at least.
          const auto first = predecessor.find(a);
          const uint64_t first_from = first != predecessor.end() ? first->second : 0;
          const Seen* now = call_before(from);
          const Seen* before = call_before(first_from);
          auto deeper = [](const FrameState& x, const FrameState& y) {
            return x.rsp_known && y.rsp_known && !x.cfa_on_rbp && !y.cfa_on_rbp &&
                   x.height > y.height;
          };
          if (now && !before && deeper(s, old))
            noreturn_evidence[now->target].insert(from);
          else if (before && !now && deeper(old, s))
            noreturn_evidence[before->target].insert(first_from);
          if (reported.insert(a).second) result.conflicts.push_back({fn.name, a, old, s});
          continue;
        }
        const FrameState joined = join(old, s);
        if (joined == old) continue;
        s = joined;
      }
      const CodeSection* c = section_of(a);
      if (!c) {
        fail(fmt::format("flows out of the code at {:#x}", a));
        continue;
      }
      auto in = decoder.decode(c->bytes.subspan(a - c->begin), a);
      if (!in) {
        fail(fmt::format("undecodable instruction at {:#x}", a));
        continue;
      }
      seen[a] = {intern(s), in->length, in->flow, in->target};
      if (seen.size() > kMaxFunctionInstructions) {
        refused = Error::plain(fmt::format("the code from {:#x} has more than {} instructions to "
                                           "analyse (a bound on the synthesizer's memory)",
                                           start, kMaxFunctionInstructions));
        return;
      }
      predecessor.try_emplace(a, from);
      // A position-independent file's code addresses come from lea, never from an immediate
      // (there, a `mov $imm` that looks like one is a constant).
      if (in->address_value && section_of(in->address_value) && !inside(in->address_value) &&
          (!in->address_value_immediate || executable_not_pie)) {
        address_taken.insert(in->address_value);
        code_pointers.insert(in->address_value);
      }
      if (!s.cfa_known() && !fn.outermost) {
        fail(fmt::format("CFA lost at {:#x} ({})", a,
                         decoder.format(c->bytes.subspan(a - c->begin), a)));
        continue;
      }
      FrameState out = s;
      apply(out, *in);
      const uint64_t next = a + in->length;
      const uint64_t here = a; // clang 14 (the fuzz build) cannot capture a structured binding
      // `table`: `to` is a target of this instruction's jump table (a jump as a direct one).
      auto go = [&](uint64_t to, bool table = false) {
        if (inside(to)) {
          work.push_back({to, out, here});
          return;
        }
        if (const uint64_t part = cold_part_of(to)) {
          fn.parts.push_back({part, extent_end(part), 0});
          work.push_back({to, out, here});
          return;
        }
        const bool jump = table || (in->has_target() && to == in->target);
        if (noreturn.count(to)) {
          ends.tail_calls.push_back(to);
        } else if (const uint64_t holder = names.count(to) ? to : known_function_holding(to)) {
          // Another function's code: a tail call to its start (or falling into it, after a call
          // to a noreturn function not known as one); with the frame in place, a jump into a
          // part split off this function known only from an FDE, to its start or its middle.
          // Else (a .cold part jumping back into its parent, the PLT) that code's analysis
          // covers it, and what it does next is not known here.
          if (holder == to && !has_frame(out)) {
            ends.tail_calls.push_back(to);
            if (jump) called.insert(to);
          } else if (jump && has_frame(out) && weak.count(holder) &&
                     saves_below_return_address(out) &&
                     (!out.rsp_known || out.rsp_aligned || out.height >= 8)) {
            auto& entries = jumped_in[holder];
            if (std::none_of(entries.begin(), entries.end(),
                             [&](const auto& e) { return e.first == to; }))
              entries.emplace_back(to, out);
          } else {
            ends.returns = true;
          }
        } else if (!jump || !has_frame(out)) {
          add_start(to, ""); // a tail call to an unknown function
          ends.tail_calls.push_back(to);
        } else {
          // A jump with the frame in place is no tail call: a part of this function split off
          // (a stripped file's .cold part), entered in this state. Parts found before at later
          // addresses of the same stretch are that part: it now starts here.
          const uint64_t end = extent_end(to);
          auto later = [&](const SynthFunction::Part& q) {
            return q.by_jump && q.begin > to && q.begin < end;
          };
          auto first = std::find_if(fn.parts.begin(), fn.parts.end(), later);
          if (first == fn.parts.end()) {
            fn.parts.push_back({to, end, 0, true});
          } else {
            first->begin = to;
            for (auto q = std::next(first); q != fn.parts.end();)
              if (later(*q)) {
                if (!first->lsda) first->lsda = q->lsda;
                q = fn.parts.erase(q);
              } else
                ++q;
          }
          work.push_back({to, out, here});
        }
      };
      switch (in->flow) {
      case x86::Flow::next:
      case x86::Flow::syscall:
        go(next);
        break;
      case x86::Flow::call:
      case x86::Flow::call_indirect:
        if (auto p = landing_pads.find(a); p != landing_pads.end())
          for (uint64_t pad : p->second)
            work.push_back({pad, out, 0});
        if (in->flow == x86::Flow::call_indirect) {
          go(next);
          break;
        }
        if (!cold.count(in->target)) {
          add_start(in->target, "");
          weak.erase(in->target);
        }
        if (!noreturn.count(in->target) && !exits_with_status(in->target, a, predecessor)) {
          ends.calls.push_back(in->target);
          go(next);
        }
        break;
      case x86::Flow::jump:
        go(in->target);
        break;
      case x86::Flow::jump_conditional:
        go(in->target);
        go(next);
        break;
      case x86::Flow::jump_indirect: {
        const auto targets = jump_table_targets(a, predecessor, fn.begin, inside);
        if (targets.empty()) {
          ends.returns = true; // a tail call through a pointer, maybe
          // Or a computed goto: on to every label of this function whose address is taken.
          // (A tail call through a pointer leaves with no frame in place.)
          if (has_frame(out)) computed_jumps.emplace_back(a, out);
        }
        for (uint64_t to : targets)
          go(to, true);
        break;
      }
      case x86::Flow::ret:
      case x86::Flow::other:
        ends.returns = true;
        break;
      case x86::Flow::trap:
        break;
      }
    }
    // Paths that decoded overlapping instructions: the one starting inside the other is a
    // misdecode (its states reach the real instructions it runs into); the analysis is done
    // again without it, a bounded number of times.
    constexpr size_t kMaxMisdecodes = 64;
    if (std::set<uint64_t>& known = misdecoded[start]; known.size() < kMaxMisdecodes) {
      bool found = false;
      for (uint64_t m : overlapping_decodes(seen))
        found |= known.size() < kMaxMisdecodes && known.insert(m).second;
      if (found) {
        result.conflicts.resize(conflicts_before);
        if (replace)
          result.functions[*replace] = std::move(fn);
        else
          result.functions.push_back(std::move(fn));
        analyse(start, index);
        return;
      }
    }
    fn.instructions = seen.size();
    if (result.instructions.size() + seen.size() > kMaxInstructions) {
      refused = Error::plain(fmt::format("more than {} instructions to analyse (a bound on the "
                                         "synthesizer's memory)",
                                         kMaxInstructions));
      return;
    }
    for (auto& [a, si] : seen)
      result.instructions.push_back({a, si.length, index, si.state});
    if (exits.size() <= index) exits.resize(index + 1);
    exits[index] = std::move(ends);
    if (replace)
      result.functions[*replace] = std::move(fn);
    else
      result.functions.push_back(std::move(fn));
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
