#include "synth/explore.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include "synth/late_starts.hpp"
#include "x86/decoder.hpp"
#include "x86/jump_table.hpp"

namespace ehelf::synth {

namespace {

// One exploration: the function's paths, over what the knowledge says of the rest of the file.
struct Explorer {
  Knowledge& k;

  // Whether a switch's target `a` outside its function lies in a part split off a function (its
  // cold cases): a .cold part, or in a stripped file code whose start is known only from an FDE,
  // that nothing calls and that opens no frame at its start (a part begins mid-flow), `a` on an
  // instruction boundary from that start. A table whose bound the recogniser misread (entries
  // past the real table) reaches into the functions after it: those are called or open frames,
  // and its targets fall anywhere in an instruction. (Whether the part's address is taken says
  // nothing: a non-PIE file's tables of absolute addresses make every case a code pointer.)
  bool split_off_part(uint64_t a) {
    if (k.cold_part_of(a)) return true;
    const uint64_t holder = k.names.count(a) ? a : k.known_function_holding(a);
    if (!holder || !k.weak.count(holder) || k.called.count(holder)) return false;
    const CodeSection* c = k.section_of(holder);
    if (!c || a >= c->end || opens_frame(k.decoder, *c, holder, c->end)) return false;
    auto [sweep, fresh] = k.part_sweeps.try_emplace(holder);
    if (fresh) { // once per part (a hostile file's tables may ask for each of 65,536 entries)
      constexpr size_t kMaxInstructions = 4096;
      const uint64_t end = std::min(c->end, k.stated_end(holder));
      std::vector<uint64_t>& starts = sweep->second;
      k.decoder.sweep(c->bytes.subspan(holder - c->begin, end - holder), holder,
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
    if (!k.exit_if_status.count(target)) return false;
    uint64_t a = call;
    for (int steps = 0; steps < 8; ++steps) {
      auto p = predecessor.find(a);
      if (p == predecessor.end() || !p->second) return false;
      a = p->second;
      const CodeSection* c = k.section_of(a);
      if (!c) return false;
      auto in = k.decoder.decode(c->bytes.subspan(a - c->begin), a);
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
      const CodeSection* c = k.section_of(a);
      if (!c) break;
      path.push_back({a, c->bytes.subspan(a - c->begin)});
      auto p = predecessor.find(a);
      if (a == function_start || p == predecessor.end() || !p->second) break;
      a = p->second;
    }
    std::reverse(path.begin(), path.end());
    std::vector<uint64_t> targets;
    const auto table = x86::recognise_jump_table(path);
    const bool first_visit = k.indirect_jumps.insert(jump).second;
    if (!table) {
      k.result.unresolved_indirect_jumps += first_visit;
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
    k.result.jump_tables += first_visit;
    return targets;
  }

  // `size` bytes at `address` in an allocated section of the file, or nothing.
  std::span<const uint8_t> data_at(uint64_t address, uint64_t size) const {
    for (const Section& s : k.elf.sections())
      if ((s.flags & SHF_ALLOC) && s.type != SHT_NOBITS && address >= s.addr &&
          address - s.addr <= s.size && size <= s.size - (address - s.addr))
        if (auto d = k.elf.section_data(s); d && address - s.addr + size <= d->size())
          return d->subspan(address - s.addr, size);
    return {};
  }

  FunctionAnalysis explore(uint64_t start, const std::vector<SynthFunction::Part>* parts,
                           const std::set<uint64_t>& blocked) {
    SynthFunction fn{k.names[start], start, k.extent_end(start), 0, start == k.entry, {}, {}};
    if (parts) // the parts found before, with their exception tables
      fn.parts = *parts;
    else
      fn.parts.push_back({fn.begin, fn.end, 0});
    auto inside = [&](uint64_t a) {
      for (const SynthFunction::Part& p : fn.parts)
        if (a >= p.begin && a < p.end) return true;
      return false;
    };
    std::unordered_map<uint64_t, Seen> seen;
    FrameState initial;
    // Each work item: where to go, the state there, and where from (for the jump tables' paths).
    struct Step {
      uint64_t to;
      FrameState state;
      uint64_t from;
    };
    std::vector<Step> work = {{start, initial, 0}};
    k.start_skipped.erase(start);
    if (auto j = k.jumped_in.find(start); j != k.jumped_in.end() && k.weak.count(start)) {
      // A function called at its start, or whose start opens a frame and is reached by no jump
      // with a frame in place (one called only through pointers: a part split off begins
      // mid-flow, maybe with a `sub` for a call's arguments), is entered there as any function;
      // jumps into its middle (from its own cold part) bring their states.
      const CodeSection* c = k.section_of(start);
      const bool jumped_to_start = std::any_of(j->second.begin(), j->second.end(),
                                               [&](const auto& e) { return e.first == start; });
      const bool function = k.called.count(start) ||
                            (!jumped_to_start && c && opens_frame(k.decoder, *c, start, c->end));
      if (!function) {
        work.clear();
        k.start_skipped.insert(start);
      }
      for (const auto& [to, state] : j->second)
        if (to != start || !function) work.push_back({to, state, 0});
      k.entries_used[start] = j->second.size();
    }
    std::unordered_map<uint64_t, uint64_t> predecessor; // on the first path that reached it
    std::set<uint64_t> reported;
    Exits ends;
    std::vector<Conflict> conflicts;
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
        for (auto l = k.code_pointers.lower_bound(p.begin);
             l != k.code_pointers.end() && *l < k.stated_end(p.begin); ++l)
          // (The function's own start is its address as a function pointer, no label.)
          if (!k.names.count(*l) && labels_followed.insert(*l).second && !inside_seen(*l))
            work.push_back({*l, state, jump});
    };
    while (!work.empty() || (!computed_jumps.empty() && (follow_labels(), !work.empty()))) {
      auto [a, s, from] = work.back();
      work.pop_back();
      if (blocked.count(a)) continue; // a path through a misdecode: taken by no real execution
      if (auto it = seen.find(a); it != seen.end()) {
        const FrameState old = k.result.states[it->second.state];
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
                           !k.section_of(in.target) && !k.plt_local_entries.count(in.target)
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
            k.noreturn_evidence[now->target].insert(from);
          else if (before && !now && deeper(old, s))
            k.noreturn_evidence[before->target].insert(first_from);
          if (reported.insert(a).second) conflicts.push_back({fn.name, a, old, s});
          continue;
        }
        const FrameState joined = join(old, s);
        if (joined == old) continue;
        s = joined;
      }
      const CodeSection* c = k.section_of(a);
      if (!c) {
        fail(fmt::format("flows out of the code at {:#x}", a));
        continue;
      }
      auto in = k.decoder.decode(c->bytes.subspan(a - c->begin), a);
      if (!in) {
        fail(fmt::format("undecodable instruction at {:#x}", a));
        continue;
      }
      seen[a] = {k.intern(s), in->length, in->flow, in->target};
      if (seen.size() > k.kMaxFunctionInstructions) {
        k.refused = Error::plain(fmt::format("the code from {:#x} has more than {} instructions to "
                                             "analyse (a bound on the synthesizer's memory)",
                                             start, k.kMaxFunctionInstructions));
        return {};
      }
      predecessor.try_emplace(a, from);
      // A position-independent file's code addresses come from lea, never from an immediate
      // (there, a `mov $imm` that looks like one is a constant).
      if (in->address_value && k.section_of(in->address_value) && !inside(in->address_value) &&
          (!in->address_value_immediate || k.executable_not_pie)) {
        k.address_taken.insert(in->address_value);
        k.code_pointers.insert(in->address_value);
      }
      if (!s.cfa_known() && !fn.outermost) {
        fail(fmt::format("CFA lost at {:#x} ({})", a,
                         k.decoder.format(c->bytes.subspan(a - c->begin), a)));
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
        if (const uint64_t part = k.cold_part_of(to)) {
          fn.parts.push_back({part, k.extent_end(part), 0});
          work.push_back({to, out, here});
          return;
        }
        const bool jump = table || (in->has_target() && to == in->target);
        if (k.noreturn.count(to)) {
          ends.tail_calls.push_back(to);
        } else if (const uint64_t holder = k.names.count(to) ? to : k.known_function_holding(to)) {
          // Another function's code: a tail call to its start (or falling into it, after a call
          // to a noreturn function not known as one); with the frame in place, a jump into a
          // part split off this function known only from an FDE, to its start or its middle.
          // Else (a .cold part jumping back into its parent, the PLT) that code's analysis
          // covers it, and what it does next is not known here.
          if (holder == to && !has_frame(out)) {
            ends.tail_calls.push_back(to);
            if (jump) k.called.insert(to);
          } else if (jump && has_frame(out) && k.weak.count(holder) &&
                     saves_below_return_address(out) &&
                     (!out.rsp_known || out.rsp_aligned || out.height >= 8)) {
            auto& entries = k.jumped_in[holder];
            if (std::none_of(entries.begin(), entries.end(),
                             [&](const auto& e) { return e.first == to; }))
              entries.emplace_back(to, out);
          } else {
            ends.returns = true;
          }
        } else if (!jump || !has_frame(out)) {
          k.add_start(to, ""); // a tail call to an unknown function
          ends.tail_calls.push_back(to);
        } else {
          // A jump with the frame in place is no tail call: a part of this function split off
          // (a stripped file's .cold part), entered in this state. Parts found before at later
          // addresses of the same stretch are that part: it now starts here.
          const uint64_t end = k.extent_end(to);
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
        if (auto p = k.landing_pads.find(a); p != k.landing_pads.end())
          for (uint64_t pad : p->second)
            work.push_back({pad, out, 0});
        if (in->flow == x86::Flow::call_indirect) {
          go(next);
          break;
        }
        if (!k.cold.count(in->target)) {
          k.add_start(in->target, "");
          k.weak.erase(in->target);
        }
        if (!k.noreturn.count(in->target) && !exits_with_status(in->target, a, predecessor)) {
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
    return FunctionAnalysis{std::move(fn), std::move(seen), std::move(ends), std::move(conflicts)};
  }
};

} // namespace

FunctionAnalysis explore_function(Knowledge& k, uint64_t start,
                                  const std::vector<SynthFunction::Part>* parts,
                                  const std::set<uint64_t>& blocked) {
  return Explorer{k}.explore(start, parts, blocked);
}

std::vector<uint64_t> overlapping_decodes(const Knowledge& k,
                                          const std::unordered_map<uint64_t, Seen>& seen) {
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
          !same_frame(k.result.states[here.state], k.result.states[seen.at(outer).state]))
        inner.push_back(a);
      continue;
    }
    outer = a;
    outer_end = end;
  }
  return inner;
}

} // namespace ehelf::synth
