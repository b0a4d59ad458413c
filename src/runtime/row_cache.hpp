// RowCache: rows found on demand (RowLookup), remembered by pc for the steps that evaluate every
// register (libunwind cursors: unw_step, unw_get_reg of the CFA). Finding a row costs a search
// of .eh_frame_hdr and a run of the CIE's and FDE's CFA programs, ~3,000 instructions; a step
// through a remembered row costs the row's evaluation alone.
//
// A row is kept only when it holds no DWARF expression (those rows point into the module's
// bytes and are rare: PLT entries, signal trampolines, realigned stacks) and its offsets fit 32
// bits; columns past the general registers are dropped, as evaluate_row ignores them. A step
// through it is apply_cached: evaluate_row's cases without the expression ones, held to the
// model by the backend oracle. Fixed size, no allocation: it lives in a thread's own pages and
// may be used in signal handlers.
#pragma once

#include <cstdint>

#include "dwarf/row_lookup.hpp"
#include "runtime/rule_cache.hpp"
#include "runtime/unwind_rule.hpp"

namespace ehelf {

struct CachedRow {
  // Callee-saved rbx, rbp, r12-r15 and the return address: the most a compiler's row saves.
  // Rows with more columns are not kept.
  static constexpr unsigned kMaxColumns = 7;
  struct Column {
    uint8_t column = 0;
    RegisterRule::Kind kind = RegisterRule::Kind::Undefined;
    uint8_t reg = 0; // RegisterRule::Register's source
    uint8_t unused = 0;
    int32_t offset = 0;
  };
  static_assert(sizeof(Column) == 8);

  uint64_t key = 0; // RuleCache::key() of the pc (0: empty)
  int32_t cfa_offset = 0;
  uint8_t cfa_reg = 0;
  uint8_t count = 0;
  uint8_t return_column = 0;
  bool signal_frame = false;
  // The save slots (Offset columns) as one span, CFA + 8 * slots_lo8 for slots_words words
  // (0: none, or wider than kMaxSpanWords): a step reads them with one read, each word of it
  // then as the column's own read would have answered (a failed span read falls back to those).
  static constexpr unsigned kMaxSpanWords = 8;
  int16_t slots_lo8 = 0;
  uint8_t slots_words = 0;
  // Every column is a save slot in the span (a compiler's rows: the return address and the
  // callee-saved registers its prologue pushed): a step takes each from the span directly.
  bool only_slots = false;
  Column columns[kMaxColumns];

  // The cached form of `row` (of the function `fn`), or false when it has none (expressions,
  // wide offsets, too many columns, a CFA register or return column past the general
  // registers).
  static bool from(RowView row, const FunctionInfo& fn, uint64_t key, CachedRow& out);
  // The row again, as RowLookup found it (the columns it kept, in the same order).
  unsigned columns_into(ColumnRule* out) const;
  CfaRule cfa() const;
};
// One step through a remembered row: `regs` (the callee's) become the caller's, `saved` (if
// given) the caller's save slots, exactly as evaluate_row gives them from the row as it was
// found (the same cases, in closed form: no expression can be in a remembered row). The backend
// oracle holds it to the model ("remembered row"); RuntimeRowCache compares its save slots with
// evaluate_row's on real stacks. On failure (the CFA's register unknown, the return address
// unreadable) `regs` and `saved` are unchanged.
StopReason apply_cached(const CachedRow& row, RegisterState& regs, MemoryReader& mem,
                        SaveSlots* saved);

// 80 bytes: a 2-way set spans two and a half cache lines; the whole cache is 20 KB.
static_assert(sizeof(CachedRow) == 80);

class RowCache {
public:
  // 2-way set associative, 128 sets: a cursor walk meets a few dozen distinct pcs, and a
  // program's walks reuse the same few hundred (RuleCache's sizing argument, at a quarter of
  // its sets: these entries are 5 times larger).
  static constexpr unsigned kSetBits = 7;
  static constexpr size_t kWays = 2;
  static constexpr size_t kSize = kWays << kSetBits;

  RowCache() { clear(); }
  void clear() {
    for (CachedRow& e : entries_)
      e = CachedRow{};
  }
  // RuleCache's multiplicative hash, to this cache's number of sets.
  static size_t set_of(uint64_t key) {
    return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> (64 - kSetBits));
  }
  const CachedRow* find(uint64_t key) const {
    const CachedRow* set = &entries_[kWays * set_of(key)];
    if (set[0].key == key) return &set[0];
    if (set[1].key == key) return &set[1];
    return nullptr;
  }
  // First in its set; the set's older entry goes.
  void install(const CachedRow& row) {
    CachedRow* set = &entries_[kWays * set_of(row.key)];
    set[1] = set[0];
    set[0] = row;
  }

private:
  CachedRow entries_[kSize];
};
static_assert(sizeof(RowCache) <= 20 * 1024, "a thread's caches stay a few pages");

} // namespace ehelf
