#include "dwarf/row_lookup.hpp"

#include "dwarf/augmentation.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "dwarf/cfa_instruction.hpp"
#include "dwarf/cfa_program.hpp"
#include "dwarf/constants.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf {
namespace {

// One column's rule (or the CFA's) in 16 bytes, so that the state and its remember stack stay
// small on a signal handler's stack. Expressions are offsets into the .eh_frame span.
struct FixedRule {
  uint8_t kind = 0; // RegisterRule::Kind, or CfaRule::Kind for the CFA
  bool present = false;
  uint16_t reg = 0;
  int32_t offset = 0;
  uint32_t expr_at = 0, expr_size = 0;
};
struct FixedState {
  FixedRule cfa; // kind: CfaRule::Kind (`present` unused)
  FixedRule column[FoundRow::kColumns];
};
static_assert(sizeof(FixedState) == 16 * (FoundRow::kColumns + 1));

// Opens the entry at `offset`: its length and id; `body` is the entry after the length field.
bool open_entry(const CfiImage& img, uint64_t offset, ByteCursor& body, uint64_t& id,
                uint64_t& id_at) {
  const std::span<const uint8_t> section = img.eh_frame;
  if (offset > section.size() || section.size() - offset < 4 ||
      !img.ready(section.data() + offset, 4))
    return false;
  ByteCursor c(section);
  c.seek(offset);
  uint64_t length = c.u32();
  if (!c.ok() || length == 0 || length >= 0xfffffff0) return false; // no 64-bit .eh_frame
  if (length > c.remaining() || length < 4) return false;
  if (!img.ready(section.data() + offset, 4 + length)) return false;
  id_at = c.offset();
  body = ByteCursor(section.subspan(id_at, length), id_at);
  id = body.u32();
  return body.ok();
}

// Encodings whose base a loaded image does not tell us (.text, .got, the function): rare, and
// refused rather than read wrongly.
bool base_known(uint8_t encoding) {
  uint8_t app = encoding & 0x70;
  return encoding == dw::EH_PE_omit || app == 0 || app == dw::EH_PE_pcrel ||
         app == dw::EH_PE_aligned;
}

// The CIE at `offset`, by the section parser's reader of its fields.
RowStatus parse_cie(const CfiImage& img, uint64_t offset, const PointerBases& bases, Cie& cie) {
  ByteCursor e;
  uint64_t id = 0, id_at = 0;
  if (!open_entry(img, offset, e, id, id_at) || id != 0) return RowStatus::Malformed;
  if (read_cie_fields(e, CfiFormat::EhFrame, bases, cie).kind != CieFault::Kind::None)
    return RowStatus::Malformed;
  if (!base_known(cie.fde_encoding) || !base_known(cie.lsda_encoding)) return RowStatus::TooComplex;
  return RowStatus::Found;
}

// Runs CFA programs into a FixedState up to `target`: apply_cfa_instruction's meaning of each
// instruction (the one CfaInterpreter applies too), on fixed storage. The storage's calls are
// public for apply_cfa_instruction; the interpreter's use is run_initial and run_fde.
class FixedInterpreter {
public:
  FixedInterpreter(const CfiImage& img, const Cie& cie, const PointerBases& bases, uint64_t target)
      : img_(img), cie_(cie), bases_(bases), target_(target) {
    state_.cfa.kind = static_cast<uint8_t>(CfaRule::Kind::Undefined);
  }

  // The CIE's initial instructions (no location moves).
  RowStatus run_initial() {
    RowStatus s = run(cie_.instructions, cie_.instructions_offset, false);
    initial_ = state_;
    return s;
  }
  // The FDE's instructions from `loc`, until the row holding the target; [begin, end) is its
  // extent (end: the FDE's end unless a later advance comes first).
  RowStatus run_fde(std::span<const uint8_t> program, uint64_t at, uint64_t pc_begin,
                    uint64_t pc_end, uint64_t& begin, uint64_t& end) {
    loc_ = pc_begin;
    end_ = pc_end;
    RowStatus s = run(program, at, true);
    if (s != RowStatus::Found) return s;
    begin = stopped_ ? stop_begin_ : loc_;
    end = stopped_ ? stop_end_ : pc_end;
    return RowStatus::Found;
  }
  const FixedState& state() const { return state_; }

  // The storage (cfa_program.hpp).
  uint64_t location() const { return loc_; }
  CfaFault advance_to(uint64_t next) {
    if (next > target_) { // the row [loc_, next) holds the target
      stop_begin_ = loc_;
      stop_end_ = next < end_ ? next : end_;
      stopped_ = true;
      return CfaFault::Stopped;
    }
    // As the table's interpreter counts rows: one per move within the FDE's range.
    if (next > loc_ && loc_ < end_ && ++rows_ > cfi_limits::kMaxRowsPerFde)
      return CfaFault::TooManyRows;
    loc_ = next;
    return CfaFault::None;
  }
  CfaFault set(unsigned column, RegisterRule::Kind kind, int64_t offset, unsigned reg,
               const CfaInstruction& in) {
    if (!fits32(offset)) return CfaFault::BeyondStorage;
    if (column >= FoundRow::kColumns) return CfaFault::None; // not a register we track
    FixedRule& r = state_.column[column];
    r = FixedRule{static_cast<uint8_t>(kind),   true, static_cast<uint16_t>(reg),
                  static_cast<int32_t>(offset), 0,    0};
    if (!in.expression.empty() || kind == RegisterRule::Kind::Expression ||
        kind == RegisterRule::Kind::ValExpression) {
      r.expr_at = static_cast<uint32_t>(in.expression.data() - img_.eh_frame.data());
      r.expr_size = static_cast<uint32_t>(in.expression.size());
    }
    return CfaFault::None;
  }
  void restore(unsigned column, bool in_fde) {
    if (column < FoundRow::kColumns)
      state_.column[column] = in_fde ? initial_.column[column] : FixedRule{};
  }
  CfaFault remember() {
    if (depth_ == RowLookup::kMaxRemembered) return CfaFault::RememberedTooDeep;
    remembered_.state[depth_++] = state_;
    return CfaFault::None;
  }
  CfaFault restore_state() {
    if (depth_ == 0) return CfaFault::NothingRemembered;
    state_ = remembered_.state[--depth_];
    return CfaFault::None;
  }
  CfaFault def_cfa(unsigned reg, int64_t offset) {
    if (!fits32(offset)) return CfaFault::BeyondStorage;
    state_.cfa = FixedRule{static_cast<uint8_t>(CfaRule::Kind::RegOffset),
                           true,
                           static_cast<uint16_t>(reg),
                           static_cast<int32_t>(offset),
                           0,
                           0};
    return CfaFault::None;
  }
  void def_cfa_register(unsigned reg) {
    if (state_.cfa.kind != static_cast<uint8_t>(CfaRule::Kind::RegOffset)) state_.cfa.offset = 0;
    state_.cfa.kind = static_cast<uint8_t>(CfaRule::Kind::RegOffset);
    state_.cfa.reg = static_cast<uint16_t>(reg);
    state_.cfa.expr_size = 0;
  }
  bool cfa_is_expression() const {
    return state_.cfa.kind == static_cast<uint8_t>(CfaRule::Kind::Expression);
  }
  CfaFault def_cfa_offset(int64_t offset) {
    if (!fits32(offset)) return CfaFault::BeyondStorage;
    state_.cfa.kind = static_cast<uint8_t>(CfaRule::Kind::RegOffset);
    state_.cfa.offset = static_cast<int32_t>(offset);
    return CfaFault::None;
  }
  CfaFault def_cfa_expression(const CfaInstruction& in) {
    state_.cfa = FixedRule{static_cast<uint8_t>(CfaRule::Kind::Expression),
                           true,
                           0,
                           0,
                           static_cast<uint32_t>(in.expression.data() - img_.eh_frame.data()),
                           static_cast<uint32_t>(in.expression.size())};
    return CfaFault::None;
  }
  void args_size(int64_t) {} // not part of a row the runtime uses

private:
  RowStatus run(std::span<const uint8_t> program, uint64_t at, bool in_fde) {
    ByteCursor c(program, at);
    const CfaFactors factors{cie_.code_align, cie_.data_align};
    while (!c.at_end()) {
      if (++steps_ > RowLookup::kMaxInstructions) return RowStatus::TooComplex;
      CfaInstruction in;
      // Instruction offsets are section offsets: the cursor's base is the program's position.
      if (decode_cfa_instruction(c, cie_, bases_, in)) return RowStatus::Malformed;
      switch (apply_cfa_instruction(in, factors, in_fde, *this)) {
      case CfaFault::None:
        break;
      case CfaFault::Stopped:
        return RowStatus::Found;
      case CfaFault::RememberedTooDeep:
      case CfaFault::TooManyRows:
      case CfaFault::BeyondStorage:
        return RowStatus::TooComplex;
      default:
        return RowStatus::Malformed;
      }
    }
    return RowStatus::Found;
  }

  static bool fits32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

  const CfiImage& img_;
  const Cie& cie_;
  const PointerBases& bases_;
  const uint64_t target_;
  FixedState state_{}, initial_{};
  // Written by remember_state before restore_state reads it: left uninitialised (zeroing its
  // 1.2 KB was a tenth of a lookup).
  union Remembered {
    Remembered() {}
    FixedState state[RowLookup::kMaxRemembered];
  } remembered_;
  unsigned depth_ = 0;
  uint64_t loc_ = 0, end_ = 0, stop_begin_ = 0, stop_end_ = 0;
  uint64_t steps_ = 0;
  uint64_t rows_ = 0; // rows of the FDE passed before the target's
  bool stopped_ = false;
};

} // namespace

namespace {
// The header up to its FDE count: version, encodings, eh_frame_ptr.
bool read_hdr_start(ByteCursor& c, uint64_t hdr_addr, PointerBases& bases, uint8_t& count_enc,
                    uint8_t& table_enc, uint64_t& eh_frame_ptr) {
  const uint8_t version = c.u8(), ptr_enc = c.u8();
  count_enc = c.u8();
  table_enc = c.u8();
  if (!c.ok() || version != 1) return false;
  bases.section_addr = hdr_addr;
  bases.data_base = hdr_addr;
  return base_known(ptr_enc) && !(ptr_enc & dw::EH_PE_indirect) &&
         read_encoded_pointer(c, ptr_enc, bases, eh_frame_ptr);
}
} // namespace

std::optional<uint64_t> RowLookup::eh_frame_address(std::span<const uint8_t> hdr,
                                                    uint64_t hdr_addr) {
  ByteCursor c(hdr);
  PointerBases bases;
  uint8_t count_enc = 0, table_enc = 0;
  uint64_t ptr = 0;
  if (!read_hdr_start(c, hdr_addr, bases, count_enc, table_enc, ptr)) return std::nullopt;
  return ptr;
}

namespace {
// The header's search table: its offset in the header, its entry count, and the .eh_frame
// address the header records. False when there is none binary search can use.
// Entries are datarel sdata4 (what every linker writes) or datarel sdata8 (what
// encode_eh_frame_hdr writes for frames registered at run time, whose code and FDEs may be more
// than 2 GiB apart); `entry_size` is 8 or 16.
bool read_search_table(std::span<const uint8_t> hdr_start, uint64_t hdr_addr, uint64_t hdr_size,
                       uint64_t& eh_frame_ptr, uint64_t& table_offset, uint64_t& count,
                       unsigned& entry_size) {
  ByteCursor c(hdr_start);
  PointerBases bases;
  uint8_t count_enc = 0, table_enc = 0;
  if (!read_hdr_start(c, hdr_addr, bases, count_enc, table_enc, eh_frame_ptr)) return false;
  if (count_enc == dw::EH_PE_omit || (count_enc & 0x70) != 0 ||
      !read_encoded_pointer(c, count_enc, bases, count))
    return false;
  if (table_enc == (dw::EH_PE_datarel | dw::EH_PE_sdata4))
    entry_size = 8;
  else if (table_enc == (dw::EH_PE_datarel | dw::EH_PE_sdata8))
    entry_size = 16;
  else
    return false;
  table_offset = c.pos();
  return count != 0 && hdr_size >= table_offset && count <= (hdr_size - table_offset) / entry_size;
}
} // namespace

bool RowLookup::has_search_table(std::span<const uint8_t> hdr_start, uint64_t hdr_addr,
                                 uint64_t hdr_size) {
  uint64_t eh_frame_ptr = 0, table_offset = 0, count = 0;
  unsigned entry_size = 0;
  return read_search_table(hdr_start, hdr_addr, hdr_size, eh_frame_ptr, table_offset, count,
                           entry_size);
}

bool RowLookup::init(const CfiImage& image) {
  image_ = image;
  count_ = 0;
  if (!image.ready(image.hdr.data(), std::min<size_t>(image.hdr.size(), 32))) return false;
  uint64_t eh_frame_ptr = 0, table_offset = 0, count = 0;
  unsigned entry_size = 0;
  if (!read_search_table(image.hdr, image.hdr_addr, image.hdr.size(), eh_frame_ptr, table_offset,
                         count, entry_size) ||
      eh_frame_ptr != image.eh_frame_addr)
    return false;
  table_offset_ = table_offset;
  entry_size_ = entry_size;
  count_ = count;
  return true;
}

Result<uint64_t> FoundRow::Expressions::evaluate(uint32_t expr, const RegisterState& regs,
                                                 MemoryReader& mem, std::optional<uint64_t> initial,
                                                 std::optional<uint64_t> cfa,
                                                 const EvalLimits& limits) const {
  Expression::FixedOps ops;
  if (expr >= row.expression_count || !Expression::decode_fixed(row.expressions[expr], ops))
    return limits.messages ? Error::plain("expression cannot be decoded into fixed storage")
                           : Error::quiet(ErrorKind::Other);
  return Expression::evaluate_ops(ops.span(), 8, regs, mem, initial, cfa, limits);
}

// The FDE covering `svma`, up to its CFA program: what find() interprets and find_function()
// reports.
struct RowLookup::LocatedFde {
  Cie cie;
  PointerBases bases;
  FunctionInfo function;
  std::span<const uint8_t> program;
  uint64_t program_at = 0;
};

namespace {

// Entry `i`'s initial location (half 0) or FDE address (half 1) in a search table of `Value`
// pairs (int32_t: datarel sdata4, int64_t: sdata8) at `table`; `present` false when its bytes
// could not be had.
template <typename Value>
uint64_t table_entry(const CfiImage& image, const uint8_t* table, uint64_t i, unsigned half,
                     bool& present) {
  const uint8_t* at = table + 2 * sizeof(Value) * i + sizeof(Value) * half;
  Value v = 0;
  if (image.ready(at, sizeof(Value)))
    std::memcpy(&v, at, sizeof(Value));
  else
    present = false;
  return image.hdr_addr + static_cast<uint64_t>(int64_t{v});
}

// The FDE address of the last entry whose initial location is at or below svma (binary search:
// the entries are sorted by location); NoEntry below the first, Malformed when an entry read
// could not be had. One instantiation per width keeps the search's loop as it was for the
// linkers' sdata4 tables (a width test per step cost a cold walk's frame ~60 instructions).
template <typename Value>
RowStatus search_table(const CfiImage& image, const uint8_t* table, uint64_t count, uint64_t svma,
                       uint64_t& fde_addr) {
  bool present = true;
  if (svma < table_entry<Value>(image, table, 0, 0, present))
    return present ? RowStatus::NoEntry : RowStatus::Malformed;
  uint64_t lo = 0, n = count;
  while (n > 1) {
    const uint64_t half = n / 2;
    if (table_entry<Value>(image, table, lo + half, 0, present) <= svma) lo += half;
    n -= half;
  }
  fde_addr = table_entry<Value>(image, table, lo, 1, present);
  return present ? RowStatus::Found : RowStatus::Malformed;
}

} // namespace

uint64_t RowLookup::entry_value(uint64_t i, unsigned half, bool& present) const {
  const uint8_t* table = image_.hdr.data() + table_offset_;
  return entry_size_ == 8 ? table_entry<int32_t>(image_, table, i, half, present)
                          : table_entry<int64_t>(image_, table, i, half, present);
}

RowStatus RowLookup::locate(uint64_t svma, LocatedFde& out) const {
  if (!count_) return RowStatus::NoEntry;
  const uint8_t* table = image_.hdr.data() + table_offset_;
  uint64_t fde_addr = 0;
  const RowStatus s = entry_size_ == 8
                          ? search_table<int32_t>(image_, table, count_, svma, fde_addr)
                          : search_table<int64_t>(image_, table, count_, svma, fde_addr);
  if (s != RowStatus::Found) return s;
  if (fde_addr - image_.eh_frame_addr >= image_.eh_frame.size()) return RowStatus::Malformed;
  const uint64_t fde_offset = fde_addr - image_.eh_frame_addr;

  ByteCursor e;
  uint64_t id = 0, id_at = 0;
  if (!open_entry(image_, fde_offset, e, id, id_at) || id == 0 || id > id_at)
    return RowStatus::Malformed;
  out.bases = PointerBases{};
  out.bases.section_addr = image_.eh_frame_addr;
  Cie& cie = out.cie;
  if (RowStatus s = parse_cie(image_, id_at - id, out.bases, cie); s != RowStatus::Found) return s;
  uint64_t pc_begin = 0, pc_range = 0;
  if (!read_encoded_pointer(e, cie.fde_encoding & 0x7f, out.bases, pc_begin) ||
      !read_encoded_pointer(e, cie.fde_encoding & 0x0f, PointerBases{}, pc_range))
    return RowStatus::Malformed;
  if (pc_begin + pc_range < pc_begin) return RowStatus::Malformed; // wraps around
  if (pc_range == 0 || pc_begin == 0 || svma < pc_begin || svma - pc_begin >= pc_range)
    return RowStatus::NoEntry;
  uint64_t lsda = 0;
  if (cie.has_augmentation_data) {
    const uint64_t size = e.uleb();
    const uint64_t data_at = e.offset();
    ByteCursor a(e.bytes(size), data_at);
    if (!e.ok()) return RowStatus::Malformed;
    if (cie.lsda_encoding != dw::EH_PE_omit &&
        !read_encoded_pointer(a, cie.lsda_encoding & 0x7f, out.bases, lsda))
      lsda = 0;
  }
  out.program_at = e.offset();
  out.program = e.bytes(e.remaining());
  if (cie.ra_register >= FoundRow::kColumns) return RowStatus::TooComplex;
  FunctionInfo& f = out.function;
  f = FunctionInfo{};
  f.pc_begin = pc_begin;
  f.pc_end = pc_begin + pc_range;
  f.fde_offset = fde_offset;
  f.lsda = lsda;
  f.personality = cie.personality;
  f.personality_slot = cie.personality_slot;
  f.return_column = static_cast<uint16_t>(cie.ra_register);
  f.signal_frame = cie.signal_frame;
  return RowStatus::Found;
}

RowStatus RowLookup::find_function(uint64_t svma, FunctionInfo& out) const {
  LocatedFde fde;
  const RowStatus s = locate(svma, fde);
  if (s == RowStatus::Found) out = fde.function;
  return s;
}

RowStatus RowLookup::find(uint64_t svma, FoundRow& out) const {
  LocatedFde fde;
  if (RowStatus s = locate(svma, fde); s != RowStatus::Found) return s;
  const Cie& cie = fde.cie;
  const PointerBases& bases = fde.bases;
  const uint64_t pc_begin = fde.function.pc_begin, pc_end = fde.function.pc_end;
  const std::span<const uint8_t> program = fde.program;
  const uint64_t program_at = fde.program_at;

  FixedInterpreter interp(image_, cie, bases, svma);
  if (RowStatus s = interp.run_initial(); s != RowStatus::Found) return s;
  uint64_t begin = 0, end = 0;
  if (RowStatus s = interp.run_fde(program, program_at, pc_begin, pc_end, begin, end);
      s != RowStatus::Found)
    return s;

  // The model's form: present columns in order, expressions as spans.
  const FixedState& st = interp.state();
  out = FoundRow{};
  auto expression = [&](const FixedRule& r) {
    out.expressions[out.expression_count] = image_.eh_frame.subspan(r.expr_at, r.expr_size);
    return out.expression_count++;
  };
  if (st.cfa.kind != static_cast<uint8_t>(CfaRule::Kind::Undefined)) {
    out.cfa.kind = static_cast<CfaRule::Kind>(st.cfa.kind);
    out.cfa.reg = st.cfa.reg;
    out.cfa.offset = st.cfa.offset;
    if (out.cfa.kind == CfaRule::Kind::Expression) {
      out.cfa.reg = 0;
      out.cfa.expr = expression(st.cfa);
    }
  }
  for (unsigned col = 0; col < FoundRow::kColumns; ++col) {
    const FixedRule& r = st.column[col];
    if (!r.present) continue;
    RegisterRule rule{static_cast<RegisterRule::Kind>(r.kind), r.reg, r.offset, kNoExpression};
    if (rule.kind == RegisterRule::Kind::Expression ||
        rule.kind == RegisterRule::Kind::ValExpression)
      rule.expr = expression(r);
    out.columns[out.count++] = ColumnRule{static_cast<uint16_t>(col), rule};
  }
  out.function = fde.function;
  out.begin = begin;
  out.end = end;
  return RowStatus::Found;
}

std::optional<UnwindTable> RowLookup::whole_table() const {
  UnwindTable table;
  uint64_t rows = 0;
  for (uint64_t i = 0; i < count_; ++i) {
    bool present = true;
    uint64_t pc = entry_value(i, 0, present);
    if (!present) continue;
    FoundRow row;
    uint32_t function = UINT32_MAX;
    // Row by row through the FDE: each lookup gives the row's extent, the next starts there.
    while (find(pc, row) == RowStatus::Found && row.end > pc) {
      if (function == UINT32_MAX) function = table.add_function(row.function);
      CfaRule cfa = row.cfa;
      ColumnRule columns[FoundRow::kColumns];
      bool ok = true;
      auto expression = [&](uint32_t index) -> uint32_t {
        auto e = Expression::decode(row.expressions[index]);
        if (!e) {
          ok = false;
          return kNoExpression;
        }
        return table.add_expression(std::move(*e));
      };
      if (cfa.kind == CfaRule::Kind::Expression) cfa.expr = expression(cfa.expr);
      for (unsigned c = 0; c < row.count; ++c) {
        columns[c] = row.columns[c];
        if (columns[c].rule.expr != kNoExpression)
          columns[c].rule.expr = expression(columns[c].rule.expr);
      }
      if (!ok) break; // a malformed expression: the table path refuses the FDE there too
      const uint32_t r = table.intern_row(cfa, {columns, row.count});
      table.add_range(TableRange{row.begin, row.end, r, function, 0});
      if (++rows > cfi_limits::kMaxRowsPerModule ||
          table.row_count() > cfi_limits::kMaxDistinctRowsPerModule)
        return std::nullopt;
      if (row.end >= row.function.pc_end) break;
      pc = row.end;
    }
  }
  table.finish();
  return table;
}

} // namespace ehelf
