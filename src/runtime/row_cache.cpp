#include "runtime/row_cache.hpp"

#include <algorithm>
#include <limits>

namespace ehelf {

namespace {
bool fits32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

} // namespace

bool CachedRow::from(RowView row, const FunctionInfo& fn, uint64_t key, CachedRow& out) {
  if (row.cfa.kind != CfaRule::Kind::RegOffset || row.cfa.reg >= x86_64::kGeneralRegs ||
      !fits32(row.cfa.offset) || fn.return_column >= x86_64::kGeneralRegs)
    return false;
  CachedRow c;
  c.key = key;
  c.cfa_reg = static_cast<uint8_t>(row.cfa.reg);
  c.cfa_offset = static_cast<int32_t>(row.cfa.offset);
  c.return_column = static_cast<uint8_t>(fn.return_column);
  c.signal_frame = fn.signal_frame;
  for (const ColumnRule& cr : row.columns) {
    if (cr.column >= x86_64::kGeneralRegs) continue; // evaluate_row ignores them too
    const RegisterRule& r = cr.rule;
    if (r.kind == RegisterRule::Kind::Expression || r.kind == RegisterRule::Kind::ValExpression)
      return false;
    if (!fits32(r.offset) || c.count == kMaxColumns) return false;
    if (r.kind == RegisterRule::Kind::Register && r.reg >= x86_64::kGeneralRegs) return false;
    Column& col = c.columns[c.count++];
    col.column = static_cast<uint8_t>(cr.column);
    col.kind = r.kind;
    col.reg = static_cast<uint8_t>(r.reg);
    col.offset = static_cast<int32_t>(r.offset);
  }
  // The span of the save slots, when they are 8-byte aligned words close together (a prologue's
  // pushes: rbx, rbp and r12-r15 below the return address).
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  bool aligned = true;
  for (unsigned i = 0; i < c.count; ++i)
    if (c.columns[i].kind == RegisterRule::Kind::Offset) {
      lo = std::min<int64_t>(lo, c.columns[i].offset);
      hi = std::max<int64_t>(hi, c.columns[i].offset);
      aligned &= c.columns[i].offset % 8 == 0;
    }
  if (lo <= hi && aligned && (hi - lo) / 8 + 1 <= kMaxSpanWords && lo / 8 >= INT16_MIN &&
      lo / 8 <= INT16_MAX) {
    c.slots_lo8 = static_cast<int16_t>(lo / 8);
    c.slots_words = static_cast<uint8_t>((hi - lo) / 8 + 1);
    c.only_slots = true;
    for (unsigned i = 0; i < c.count; ++i)
      c.only_slots &= c.columns[i].kind == RegisterRule::Kind::Offset;
  }
  out = c;
  return true;
}

unsigned CachedRow::columns_into(ColumnRule* out) const {
  for (unsigned i = 0; i < count; ++i) {
    out[i] = ColumnRule{};
    out[i].column = columns[i].column;
    out[i].rule.kind = columns[i].kind;
    out[i].rule.reg = columns[i].reg;
    out[i].rule.offset = columns[i].offset;
  }
  return count;
}

CfaRule CachedRow::cfa() const {
  CfaRule r;
  r.kind = CfaRule::Kind::RegOffset;
  r.reg = cfa_reg;
  r.offset = cfa_offset;
  return r;
}

StopReason apply_cached(const CachedRow& row, RegisterState& regs, MemoryReader& mem,
                        SaveSlots* saved) {
  if (!regs.has(row.cfa_reg)) return StopReason::MissingRegister;
  const uint64_t cfa = regs.get(row.cfa_reg) + static_cast<uint64_t>(int64_t(row.cfa_offset));
  // The save slots in one read where they can be (a read of each word alone answers the same).
  uint64_t span[CachedRow::kMaxSpanWords];
  const uint64_t span_at = cfa + static_cast<uint64_t>(int64_t(row.slots_lo8) * 8);
  const bool span_read =
      row.slots_words && mem.read(span_at, span, size_t(row.slots_words) * sizeof(uint64_t));
  // Each column's value is found from the callee's registers first and written after (a
  // register rule reads the callee's value; on failure `regs` is unchanged). For `saved`: the
  // registers given a rule other than same value, those read from memory, and where
  // (evaluate_row's bookkeeping).
  uint64_t value[CachedRow::kMaxColumns];
  uint32_t ruled = 0, read = 0, known = 0, unknown = 0; // bits by column
  uint64_t read_at[x86_64::kGeneralRegs];
  bool rip_ruled = false, rsp_ruled = false;
  if (span_read && row.only_slots) {
    // The general loop's Offset case for every column, read from the span (no read can fail).
    for (unsigned i = 0; i < row.count; ++i) {
      const CachedRow::Column& c = row.columns[i];
      value[i] = span[c.offset / 8 - row.slots_lo8]; // (offsets are multiples of 8 here)
      read |= 1u << c.column;
    }
    ruled = known = read;
    rip_ruled = read >> x86_64::RIP & 1u;
    rsp_ruled = read >> x86_64::RSP & 1u;
    if (saved)
      for (unsigned i = 0; i < row.count; ++i)
        read_at[row.columns[i].column] =
            cfa + static_cast<uint64_t>(int64_t(row.columns[i].offset));
  } else {
    for (unsigned i = 0; i < row.count; ++i) {
      const CachedRow::Column& c = row.columns[i];
      const uint32_t bit = 1u << c.column;
      rip_ruled |= c.column == x86_64::RIP;
      rsp_ruled |= c.column == x86_64::RSP;
      switch (c.kind) {
      case RegisterRule::Kind::SameValue: // no rule: same value (callee-saved convention)
        continue;
      case RegisterRule::Kind::Offset: {
        ruled |= bit;
        const uint64_t at = cfa + static_cast<uint64_t>(int64_t(c.offset));
        if (span_read) {
          value[i] = span[(at - span_at) / 8];
        } else if (!mem.read_u64(at, value[i])) {
          // Only the return address is essential (as in evaluate_row).
          if (c.column == row.return_column) return StopReason::BadRead;
          unknown |= bit;
          continue;
        }
        read |= bit;
        read_at[c.column] = at;
        break;
      }
      case RegisterRule::Kind::ValOffset:
        ruled |= bit;
        value[i] = cfa + static_cast<uint64_t>(int64_t(c.offset));
        break;
      case RegisterRule::Kind::Register:
        ruled |= bit;
        if (!regs.has(c.reg)) {
          unknown |= bit;
          continue;
        }
        value[i] = regs.get(c.reg);
        break;
      default: // Undefined, Architectural (expressions are never kept)
        ruled |= bit;
        unknown |= bit;
        continue;
      }
      known |= bit;
    }
  }
  // The caller's registers: the callee's where no rule says otherwise.
  for (unsigned i = 0; i < row.count; ++i)
    if (known >> row.columns[i].column & 1u) regs.value[row.columns[i].column] = value[i];
  regs.valid = (regs.valid & ~unknown) | known;
  // The caller's rip is the return address; its rsp is the CFA unless a rule says otherwise.
  if (row.return_column != x86_64::RIP) {
    if (regs.has(row.return_column))
      regs.set(x86_64::RIP, regs.get(row.return_column));
    else
      regs.clear(x86_64::RIP);
  } else if (!rip_ruled) {
    regs.clear(x86_64::RIP);
  }
  if (!rsp_ruled) regs.set(x86_64::RSP, cfa);
  if (saved) {
    // rsp without a rule is the CFA, a value held nowhere; rip is the return-address column.
    if (!rsp_ruled) ruled |= 1u << x86_64::RSP;
    saved->valid &= ~ruled;
    for (uint32_t bits = read; bits; bits &= bits - 1) {
      const unsigned reg = static_cast<unsigned>(__builtin_ctz(bits));
      saved->set(reg, read_at[reg]);
    }
    if (row.return_column != x86_64::RIP) {
      if (saved->has(row.return_column) && regs.has(x86_64::RIP))
        saved->set(x86_64::RIP, saved->address[row.return_column]);
      else
        saved->clear(x86_64::RIP);
    }
    if (!regs.has(x86_64::RIP)) saved->clear(x86_64::RIP);
  }
  return StopReason::None;
}

} // namespace ehelf
