// RuleCache: a direct-mapped cache of unwind rules keyed by lookup pc, in the 16-byte shape the
// local walk (Unwinder::backtrace_direct) executes without touching the module tables.
//
// Besides the rule, each entry remembers which entry its caller's pc used the last time
// (`next`). A walk of a stack it has seen before follows those links and only checks that the
// return address it loads is the one the link expects, so the next rule is known before the
// load that confirms it completes: one dependent load per frame, as a frame-pointer walk,
// instead of a load, a hash and a second load.
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/compact_table.hpp"

namespace ehelf {

struct HotRule {
  // `op` bits (0: an empty entry).
  // kFast: the cases the walk's fast path handles alone: return address at CFA - 8, and a
  // saved rbp where checking the CFA against the stack's bounds checks its read too (inside
  // the frame for an rsp-based CFA, at CFA - 16 for an rbp-based one: see hot_form).
  static constexpr uint8_t kFast = 1;
  static constexpr uint8_t kRbpBased = 2;  // CFA = rbp + cfa_offset (else rsp + cfa_offset)
  static constexpr uint8_t kRbpSaved = 4;  // caller's rbp at CFA + 8 * rbp_offset8
  static constexpr uint8_t kRbxSaved = 8;  // caller's rbx at CFA + 8 * rbx_offset8
  static constexpr uint8_t kEnd = 16;      // return address undefined: the outermost frame
  static constexpr uint8_t kEmpty = 0;

  uint64_t pc = 0;       // the lookup pc (return address - 1, or an interrupted pc)
  uint16_t next = 0;     // byte offset in the cache of the entry the caller's pc took last time
  int16_t cfa_offset = 0;
  int8_t rbp_offset8 = 0;
  int8_t rbx_offset8 = 0;
  uint8_t op = kEmpty;
  uint8_t spare = 0;
};
static_assert(sizeof(HotRule) == 16);

// The hot form of a compact rule (without pc and link), or op == kEmpty when it has none: the
// return address not at CFA - 8, offsets out of range, or a rule that makes rbp or rbx unknown
// (the walk's fast path only ever learns register values).
HotRule hot_form(const CompactRule& rule);

class RuleCache {
public:
  static constexpr unsigned kBits = 9;
  static constexpr size_t kSize = size_t(1) << kBits;

  RuleCache() { clear(); }
  void clear() { std::memset(static_cast<void*>(entries_), 0, sizeof entries_); }

  // A multiplicative hash into a power of two (Valgrind takes pc % 509; this avoids a division).
  static size_t index(uint64_t lookup) {
    return static_cast<size_t>((lookup * 0x9e3779b97f4a7c15ULL) >> (64 - kBits));
  }
  HotRule& slot(uint64_t lookup) { return entries_[index(lookup)]; }
  // Entries addressed by byte offset, as `next` links are.
  HotRule& at(uint16_t offset) {
    return *reinterpret_cast<HotRule*>(reinterpret_cast<char*>(entries_) + offset);
  }
  uint16_t offset_of(const HotRule& e) const {
    return static_cast<uint16_t>(reinterpret_cast<const char*>(&e) -
                                 reinterpret_cast<const char*>(entries_));
  }

private:
  alignas(64) HotRule entries_[kSize];
};
static_assert(RuleCache::kSize * sizeof(HotRule) <= 65536, "links are 16-bit byte offsets");

} // namespace ehelf
