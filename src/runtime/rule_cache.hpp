// RuleCache: a set-associative cache of unwind rules keyed by pc, in the 16-byte shape the
// local walk (Unwinder::backtrace_direct) executes without touching the module tables.
//
// Besides the rule, each entry remembers which entries its callers' pcs used the last two times
// (`next`: two, so that a recursion's exit, or a function with two callers, does not make the
// link flip). A walk of a stack it has seen before follows those links and only checks that
// the return address it loads is the one a link expects, so the next rule is known before the
// load that confirms it completes: one dependent load per frame, as a frame-pointer walk,
// instead of a load, a hash and a second load.
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/compact_table.hpp"

namespace ehelf {

struct HotRule {
  // `op` bits. The walk's fast path takes its usual frame (an rsp-based CFA) on one test of
  // kSlow | kRbpBased, so both are clear there; an empty entry is kSlow alone (kEmpty), which a
  // rule never is (a rule the fast path declines has kEnd, kRbpBased or kRbpSaved too).
  // kSlow: the fast path does not take the entry alone: an empty entry, the outermost frame, a
  // saved rbp where checking the CFA against the stack's bounds does not check its read (the
  // fast path reads it inside the frame for an rsp-based CFA, at CFA - 16 for an rbp-based one:
  // see hot_form), or an rbp-based CFA without rbp saved at CFA - 16.
  static constexpr uint8_t kSlow = 1;
  static constexpr uint8_t kRbpBased = 2; // CFA = rbp + cfa_offset (else rsp + cfa_offset)
  static constexpr uint8_t kRbpSaved = 4; // caller's rbp at CFA + 8 * rbp_offset8
  static constexpr uint8_t kRbxSaved = 8; // caller's rbx at CFA + 8 * rbx_offset8()
  static constexpr uint8_t kEnd = 16; // return address undefined: the outermost frame (with kSlow)
  static constexpr uint8_t kEmpty = kSlow;
  // Bits 5-7: with kRbxSaved, -1 - rbx_offset8 (rbx saved 8 to 64 bytes below the CFA, as the
  // pushes of a prologue put it; other rules are not cached). Only the general step reads it.
  static constexpr unsigned kRbxShift = 5;
  int rbx_offset8() const { return -1 - (op >> kRbxShift); }

  uint64_t key = 0;      // RuleCache::key() of the pc (0: empty)
  uint16_t next[2] = {}; // byte offsets in the cache of the entries the caller's pcs took last
  int16_t cfa_offset = 0;
  int8_t rbp_offset8 = 0;
  uint8_t op = kEmpty;
};
static_assert(sizeof(HotRule) == 16);

// The hot form of a compact rule (without pc and link), or op == kEmpty when it has none: the
// return address not at CFA - 8, offsets out of range, or a rule that makes rbp or rbx unknown
// (the walk's fast path only ever learns register values).
HotRule hot_form(const UnwindRule& rule);
// The rule a hot form stands for (op neither kEmpty nor kEnd): hot_form's inverse, up to what
// the hot form drops (the signal-frame flag, which hot forms never have). Inline: the general
// step runs it on every rule-cache hit.
inline UnwindRule unwind_rule_of(const HotRule& h) {
  UnwindRule rule;
  rule.kind = (h.op & HotRule::kRbpBased) ? UnwindRule::CfaRbp : UnwindRule::CfaRsp;
  rule.cfa_offset = h.cfa_offset;
  rule.rip = UnwindRule::AtCfa;
  rule.rip_offset = -8;
  rule.rbp = (h.op & HotRule::kRbpSaved) ? UnwindRule::AtCfa : UnwindRule::Same;
  rule.rbp_offset = static_cast<int16_t>(8 * h.rbp_offset8);
  rule.rbx = (h.op & HotRule::kRbxSaved) ? UnwindRule::AtCfa : UnwindRule::Same;
  rule.rbx_offset = static_cast<int16_t>(8 * h.rbx_offset8());
  return rule;
}

// One frame by a hot rule, on a stack whose bytes this process reads directly: what the local
// walk's fast path runs (fast_walk.cpp) and what the backend oracle holds to the model
// (backend_check.cpp's "hot form, fast path"). Addresses with an h are host addresses (a stack
// address + `delta`); `hhi` ends the readable bytes. The cases:
//   op without kSlow, kRbpBased  CFA = rsp + cfa_offset, taken when CFA <= hhi (cfa_offset >= 8,
//                                hot_form: the words read are above rsp);
//                                rbp = at CFA + 8 * rbp_offset8 with kRbpSaved, else unchanged
//   kRbpBased without kSlow      CFA = rbp + cfa_offset, taken when rsp + 16 <= CFA <= hhi (the
//                                words read are in the stack, and the CFA grows: no loops);
//                                rbp = at CFA - 16 (hot_form)
//   then                         return address = at CFA - 8, rsp = CFA
//   kSlow                        not taken: End with kEnd (the outermost frame), else Declined
//                                (the general step decides)
// Taken: `hcfa` and `ret` are set, `bp` is the caller's rbp. Otherwise nothing changes.
enum class HotStep : uint8_t { Taken, Declined, End };
__attribute__((always_inline)) inline HotStep hot_step(const HotRule& h, uint64_t hsp, uint64_t& bp,
                                                       uint64_t& hcfa, uint64_t& ret, uint64_t hhi,
                                                       uint64_t delta) {
  const uint8_t op = h.op;
  if (!(op & (HotRule::kSlow | HotRule::kRbpBased))) [[likely]] {
    hcfa = hsp + static_cast<uint64_t>(int64_t(h.cfa_offset));
    if (hcfa > hhi) [[unlikely]]
      return HotStep::Declined;
    if (op & HotRule::kRbpSaved)
      std::memcpy(&bp, reinterpret_cast<const void*>(hcfa + 8 * int64_t(h.rbp_offset8)), 8);
  } else if (!(op & HotRule::kSlow)) {
    hcfa = bp + delta + static_cast<uint64_t>(int64_t(h.cfa_offset));
    if (hcfa > hhi || hcfa < hsp + 16) [[unlikely]]
      return HotStep::Declined;
    std::memcpy(&bp, reinterpret_cast<const void*>(hcfa - 16), 8);
  } else {
    return (op & HotRule::kEnd) ? HotStep::End : HotStep::Declined;
  }
  std::memcpy(&ret, reinterpret_cast<const void*>(hcfa - 8), 8);
  return HotStep::Taken;
}

// One module's hot rules as a rule-cache fill reads them: where they apply and the compact
// table's index, flattened so that a miss costs a range check and the table search.
struct ModuleRules {
  uint64_t lo = 0, size = 0; // AVMAs [lo, lo + size): the module's code inside its table
  uint64_t table_base = 0;   // the AVMA of the compact table's base
  CompactIndex index;
  const HotRule* hot = nullptr; // hot_form() of each compact rule
  bool contains(uint64_t pc) const { return pc - lo < size; }
  // The hot form of the rule for `pc` (contains(pc)).
  const HotRule& rule(uint64_t pc) const {
    return hot[index.rule_index(static_cast<uint32_t>(pc - table_base))];
  }
};

class RuleCache {
public:
  // 2-way set associative, 512 sets: the hot pcs of a profile (dozens) rarely need three slots of
  // one set, where a direct-mapped cache of this size would thrash on the first two that collide.
  static constexpr unsigned kSetBits = 9;
  static constexpr size_t kWays = 2;
  static constexpr size_t kSize = kWays << kSetBits;

  RuleCache() { clear(); }
  // Drops the rules (every entry empty: key 0, op kEmpty). The module memo stays: it checks the
  // map's generation itself.
  void clear() {
    for (HotRule& e : entries_)
      e = HotRule{};
  }

  // Entries are keyed by the frame's pc as the walk has it: a return address as is (its rule is
  // that of the call, at pc - 1), an interrupted instruction's pc with the top bit set (its own
  // rule; user-space addresses never have that bit). 0: empty.
  static uint64_t key(uint64_t pc, bool exact) { return exact ? pc | (uint64_t(1) << 63) : pc; }
  // A multiplicative hash into a power of two (Valgrind takes pc % 509; this avoids a division).
  static size_t set_of(uint64_t key) {
    return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> (64 - kSetBits));
  }
  // The entry holding `key`, or null (an empty entry matches key 0: check op).
  HotRule* find(uint64_t key) {
    HotRule* set = &entries_[kWays * set_of(key)];
    if (set[0].key == key) return &set[0];
    if (set[1].key == key) return &set[1];
    return nullptr;
  }
  // Puts `rule` first in its set, the set's previous first entry second (the older second one
  // goes): each set keeps its two most recently filled rules.
  HotRule& install(const HotRule& rule) {
    HotRule* set = &entries_[kWays * set_of(rule.key)];
    set[1] = set[0];
    set[0] = rule;
    return set[0];
  }
  // Makes room for `key` first in its set (the first entry moves second, the older second one
  // goes) and returns the room, keyed but otherwise empty, to be filled in place.
  HotRule& make_room(uint64_t key) {
    HotRule* set = &entries_[kWays * set_of(key)];
    set[1] = set[0];
    set[0] = HotRule{};
    return set[0];
  }
  // Entries addressed by byte offset, as `next` links are.
  HotRule& at(uint16_t offset) {
    return *reinterpret_cast<HotRule*>(reinterpret_cast<char*>(entries_) + offset);
  }
  uint16_t offset_of(const HotRule& e) const {
    return static_cast<uint16_t>(reinterpret_cast<const char*>(&e) -
                                 reinterpret_cast<const char*>(entries_));
  }

  // The modules of the last two fills (a walk mostly alternates between a program and libc),
  // valid for the module map generation they were taken from: pointers into that map's module
  // data, dropped as soon as the map's generation differs.
  const ModuleRules* recent_module(uint64_t pc, uint64_t map_generation) const {
    if (map_generation != generation_) [[unlikely]]
      return nullptr;
    if (modules_[0].contains(pc)) return &modules_[0];
    if (modules_[1].contains(pc)) return &modules_[1];
    return nullptr;
  }
  void remember_module(const ModuleRules& m, uint64_t map_generation) {
    if (map_generation != generation_) forget_modules(map_generation);
    modules_[1] = modules_[0];
    modules_[0] = m;
  }
  void forget_modules(uint64_t map_generation) {
    modules_[0] = modules_[1] = ModuleRules{};
    generation_ = map_generation;
  }

private:
  alignas(64) HotRule entries_[kSize];
  ModuleRules modules_[2];
  uint64_t generation_ = 0;
};
static_assert(RuleCache::kSize * sizeof(HotRule) <= 65536, "links are 16-bit byte offsets");

} // namespace ehelf
