#include "synth/frame_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "model/dw_op.hpp"
#include "model/registers.hpp"
#include "support/byte_writer.hpp"

namespace ehelf::synth {

using x86::Reg;
using Kind = x86::StackOp::Kind;

namespace {

using x86::callee_saved;

bool caller_saved(Reg r) {
  return r != Reg::none && r != Reg::rsp && !callee_saved(r);
}

} // namespace

bool has_frame(const FrameState& s) {
  return s.cfa_on_rbp || !s.rsp_known || s.rsp_aligned || s.height != 8 ||
         std::any_of(std::begin(s.saved), std::end(s.saved), [](int32_t v) { return v != 0; });
}

bool saves_below_return_address(const FrameState& s) {
  for (int i = 0; i < 16; ++i)
    if (s.saved[i] > -16 && s.saved[i] != 0 && !(s.saved_aligned >> i & 1)) return false;
  return true;
}

size_t FrameStateHash::operator()(const FrameState& s) const {
  size_t h = 0;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull + (h >> 29); };
  mix(uint64_t(s.rsp_known) | uint64_t(s.rbp_known) << 1 | uint64_t(s.cfa_on_rbp) << 2 |
      uint64_t(s.rsp_aligned) << 3 | uint64_t(s.rbp_aligned) << 4 | uint64_t(s.drap) << 8 |
      uint64_t(s.saved_aligned) << 16 | uint64_t(s.clobbered) << 32 |
      uint64_t(s.restored_aligned) << 48);
  mix(uint64_t(uint32_t(s.height)) | uint64_t(uint32_t(s.rbp_depth)) << 32);
  mix(uint64_t(uint32_t(s.drap_depth)) | uint64_t(uint32_t(s.drap_slot)) << 32);
  for (size_t i = 0; i < 16; ++i)
    mix(uint64_t(uint32_t(s.saved[i])) | uint64_t(uint32_t(s.restored[i])) << 32);
  return h;
}

bool same_frame(const FrameState& a, const FrameState& b) {
  if (a.cfa_on_rbp != b.cfa_on_rbp) return false;
  if (a.cfa_on_rbp) {
    if (a.rbp_known != b.rbp_known || (a.rbp_known && a.rbp_depth != b.rbp_depth)) return false;
  } else if (a.rsp_known != b.rsp_known ||
             (a.rsp_known && (a.height != b.height || a.rsp_aligned != b.rsp_aligned)))
    return false;
  return a.saved_aligned == b.saved_aligned &&
         std::equal(std::begin(a.saved), std::end(a.saved), std::begin(b.saved));
}

FrameState join(FrameState into, const FrameState& other) {
  if (into.rsp_known != other.rsp_known || into.height != other.height ||
      into.rsp_aligned != other.rsp_aligned)
    into.rsp_known = false;
  if (into.rbp_known != other.rbp_known || into.rbp_depth != other.rbp_depth ||
      into.rbp_aligned != other.rbp_aligned)
    into.rbp_known = false;
  if (into.drap != other.drap || into.drap_depth != other.drap_depth) into.drap = Reg::none;
  if (into.drap_slot != other.drap_slot) into.drap_slot = 0;
  into.clobbered |= other.clobbered;
  for (int i = 0; i < 16; ++i)
    if (into.restored[i] != other.restored[i] ||
        ((into.restored_aligned ^ other.restored_aligned) >> i & 1))
      into.restored[i] = 0;
  if (!into.rsp_known) into.height = 0, into.rsp_aligned = false;
  if (!into.rbp_known) into.rbp_depth = 0, into.rbp_aligned = false;
  if (into.drap == Reg::none) into.drap_depth = 0;
  return into;
}

void apply(FrameState& s, const x86::Instruction& in) {
  bool rsp_done = false, rbp_done = false;
  Reg drap_set = Reg::none; // the DRAP register this instruction defines
  for (unsigned i = 0; i < in.op_count; ++i) {
    const x86::StackOp& op = in.ops[i];
    // Where `base` points: known, relative to A (aligned) or to the CFA, and at what depth.
    struct Where {
      bool known = false, aligned = false;
      int32_t depth = 0; // base = CFA (or A) - depth
    };
    auto where = [&](Reg base) -> Where {
      if (base == Reg::rsp && s.rsp_known) return {true, s.rsp_aligned, s.height};
      if (base == Reg::rbp && s.rbp_known) return {true, s.rbp_aligned, s.rbp_depth};
      if (base != Reg::none && base == s.drap) return {true, false, s.drap_depth};
      return {};
    };
    const uint16_t bit = op.reg == Reg::none ? 0 : uint16_t(1u << unsigned(op.reg));
    switch (op.kind) {
    case Kind::rsp_add:
      s.height -= op.disp;
      rsp_done = true;
      break;
    case Kind::rsp_align:
      // With a DRAP holding the CFA, rsp goes on relative to the aligned address; otherwise
      // (a frame pointer holds the CFA) it is simply lost until restored from rbp.
      if (s.rsp_known && !s.rsp_aligned && s.drap != Reg::none) {
        s.rsp_aligned = true;
        s.height = 0;
      } else
        s.rsp_known = false;
      rsp_done = true;
      break;
    case Kind::copy: {
      const Where w = where(op.base);
      if (op.reg == Reg::rbp) {
        s.rbp_known = w.known;
        s.rbp_aligned = w.known && w.aligned;
        s.rbp_depth = w.known ? w.depth - op.disp : 0;
        // A frame pointer is `mov %rsp,%rbp` right after the caller's rbp was pushed; other
        // copies (lea 0x20(%rsp),%rbp; mov %rsp,%rbp far below the save slot) use rbp as a general
        // register.
        if (w.known && !w.aligned && op.base == Reg::rsp && op.disp == 0 &&
            s.saved[unsigned(Reg::rbp)] && !(s.saved_aligned & (1u << unsigned(Reg::rbp))) &&
            s.saved[unsigned(Reg::rbp)] == -s.rbp_depth)
          s.cfa_on_rbp = true;
        rbp_done = true;
      } else if (op.reg == Reg::rsp) {
        s.rsp_known = w.known;
        s.rsp_aligned = w.known && w.aligned;
        s.height = w.known ? w.depth - op.disp : 0;
        rsp_done = true;
      } else if (w.known && !w.aligned && op.base != Reg::none) {
        // lea 8(%rsp),%r10: a register holding the CFA (the DRAP when rsp is realigned next).
        s.drap = op.reg;
        s.drap_depth = w.depth - op.disp;
        drap_set = op.reg;
      }
      break;
    }
    case Kind::store: {
      const Where w = where(op.base);
      if (!w.known) break;
      if (op.reg != Reg::none && op.reg == s.drap && w.aligned && s.drap_depth == 0)
        s.drap_slot = op.disp - w.depth; // push %r10: the slot now holds the CFA
      if (op.reg != Reg::none && callee_saved(op.reg) && !(s.clobbered & bit) &&
          !s.saved[unsigned(op.reg)]) {
        s.saved[unsigned(op.reg)] = op.disp - w.depth;
        if (w.aligned) s.saved_aligned |= bit;
      }
      break;
    }
    case Kind::load: {
      if (op.reg == Reg::none) break;
      const unsigned r = unsigned(op.reg);
      const Where w = where(op.base);
      const int32_t slot = w.known ? op.disp - w.depth : 0;
      const bool slot_aligned = w.known && w.aligned;
      if (callee_saved(op.reg) && slot && s.saved[r] == slot &&
          bool(s.saved_aligned & bit) == slot_aligned) {
        s.saved[r] = 0;
        s.saved_aligned &= uint16_t(~bit);
        s.restored[r] = slot;
        s.restored_aligned =
            slot_aligned ? uint16_t(s.restored_aligned | bit) : uint16_t(s.restored_aligned & ~bit);
        s.clobbered &= uint16_t(~bit);
      } else {
        s.restored[r] = 0;
        if (callee_saved(op.reg)) s.clobbered |= bit;
      }
      if (slot && slot_aligned && slot == s.drap_slot) {
        s.drap = op.reg; // pop %r10: the DRAP again
        s.drap_depth = 0;
        drap_set = op.reg;
      }
      if (op.reg == Reg::rbp) {
        s.rbp_known = false;
        s.cfa_on_rbp = false;
        rbp_done = true;
      }
      if (op.reg == Reg::rsp) {
        s.rsp_known = false;
        rsp_done = true;
      }
      break;
    }
    case Kind::push_memory:
      break;
    case Kind::unmodelled:
      if (op.reg == Reg::rsp) s.rsp_known = false, rsp_done = true;
      if (op.reg == Reg::rbp) s.rbp_known = false, rbp_done = true;
      break;
    }
  }
  // Other writes: a register overwritten no longer holds its caller's value.
  for (Reg r : kCalleeSaved)
    if (in.writes_reg(r)) {
      bool by_load = false;
      for (unsigned i = 0; i < in.op_count; ++i)
        by_load |= in.ops[i].kind == Kind::load && in.ops[i].reg == r;
      if (!by_load) {
        s.clobbered |= uint16_t(1u << unsigned(r));
        s.restored[unsigned(r)] = 0;
      }
    }
  // A call pushes and its callee pops the return address: rsp is back when the call returns.
  const bool call = in.flow == x86::Flow::call || in.flow == x86::Flow::call_indirect;
  if (in.writes_reg(Reg::rsp) && !rsp_done && !call) s.rsp_known = false;
  if (in.writes_reg(Reg::rbp) && !rbp_done) s.rbp_known = false;
  // The DRAP register is lost when overwritten, and a caller-saved one across a call.
  if (s.drap != Reg::none && s.drap != drap_set &&
      (in.writes_reg(s.drap) || (call && caller_saved(s.drap))))
    s.drap = Reg::none;
  if (!s.rsp_known) s.height = 0, s.rsp_aligned = false;
  if (!s.rbp_known) s.rbp_depth = 0, s.rbp_aligned = false;
  if (s.drap == Reg::none) s.drap_depth = 0;
  if (s.cfa_on_rbp && !s.rbp_known && s.rsp_known) s.cfa_on_rbp = false;
}

uint16_t dwarf_column(Reg r) {
  return x86::dwarf_number(r);
}

uint32_t ExpressionPool::intern(const std::vector<uint8_t>& bytes) {
  std::string key(bytes.begin(), bytes.end());
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  auto e = Expression::decode(bytes);
  const uint32_t id = table_.add_expression(e ? std::move(*e) : Expression{});
  ids_.emplace(std::move(key), id);
  return id;
}

namespace {

// `DW_OP_breg<base> offset` (the address base + offset), then `DW_OP_deref` if asked.
std::vector<uint8_t> breg_expression(Reg base, int64_t offset, bool deref) {
  std::vector<uint8_t> bytes = {uint8_t(OP_breg0 + dwarf_column(base))};
  put_sleb(bytes, offset);
  if (deref) bytes.push_back(OP_deref);
  return bytes;
}

// The register an aligned save slot is reached from (rbp, else rsp) and its depth below A.
std::pair<Reg, int32_t> aligned_base(const FrameState& s) {
  if (s.rbp_known && s.rbp_aligned) return {Reg::rbp, s.rbp_depth};
  if (s.rsp_known && s.rsp_aligned) return {Reg::rsp, s.height};
  return {Reg::none, 0};
}

} // namespace

bool state_row(const FrameState& s, bool outermost, ExpressionPool& expressions,
               std::vector<ColumnRule>& columns, CfaRule& cfa) {
  if (!s.cfa_known() && !outermost) return false;
  const auto [aligned, aligned_depth] = aligned_base(s);
  // An outermost frame's row needs no CFA (its return address is undefined), but unwinders
  // compute it anyway: only from rsp or rbp, which they always know (_start's `mov %rsp,%rdx;
  // and $-16,%rsp` would give rdx, which libgcc cannot read there).
  const bool rsp_based = s.rsp_known && !s.rsp_aligned;
  if (!s.cfa_known() || (outermost && !rsp_based && !(s.cfa_on_rbp && s.rbp_known)))
    cfa = {CfaRule::Kind::RegOffset, x86_64::RSP, 8, kNoExpression};
  else if (s.cfa_on_rbp && s.rbp_known && !s.rbp_aligned)
    cfa = {CfaRule::Kind::RegOffset, x86_64::RBP, s.rbp_depth, kNoExpression};
  else if (rsp_based)
    cfa = {CfaRule::Kind::RegOffset, x86_64::RSP, s.height, kNoExpression};
  else if (s.drap != Reg::none)
    cfa = {CfaRule::Kind::RegOffset, dwarf_column(s.drap), s.drap_depth, kNoExpression};
  else // the DRAP's slot holds the CFA
    cfa = {CfaRule::Kind::Expression, 0, 0,
           expressions.intern(breg_expression(aligned, s.drap_slot + aligned_depth, true))};
  columns.clear();
  for (Reg r : kCalleeSaved) {
    const int32_t slot = s.saved[unsigned(r)];
    if (!slot) continue;
    if (!(s.saved_aligned >> unsigned(r) & 1))
      columns.push_back({dwarf_column(r), {RegisterRule::Kind::Offset, 0, slot, kNoExpression}});
    else if (aligned != Reg::none)
      columns.push_back(
          {dwarf_column(r),
           {RegisterRule::Kind::Expression, 0, 0,
            expressions.intern(breg_expression(aligned, slot + aligned_depth, false))}});
  }
  columns.push_back(
      {x86_64::RIP, outermost ? RegisterRule{RegisterRule::Kind::Undefined, 0, 0, kNoExpression}
                              : RegisterRule{RegisterRule::Kind::Offset, 0, -8, kNoExpression}});
  std::sort(columns.begin(), columns.end(),
            [](const ColumnRule& a, const ColumnRule& b) { return a.column < b.column; });
  return true;
}

std::string describe(const FrameState& s) {
  std::string out;
  const auto [aligned, aligned_depth] = aligned_base(s);
  if (s.cfa_on_rbp && s.rbp_known && !s.rbp_aligned)
    out = fmt::format("CFA=rbp+{}", s.rbp_depth);
  else if (s.rsp_known && !s.rsp_aligned)
    out = fmt::format("CFA=rsp+{}", s.height);
  else if (s.drap != Reg::none)
    out = fmt::format("CFA={}+{}", x86::reg_name(s.drap), s.drap_depth);
  else if (s.drap_slot_base() != Reg::none)
    out = fmt::format("CFA=[{}{:+}]", x86::reg_name(aligned), s.drap_slot + aligned_depth);
  else
    out = "CFA=?";
  for (Reg r : kCalleeSaved) {
    const int32_t slot = s.saved[unsigned(r)];
    if (!slot) continue;
    if (!(s.saved_aligned >> unsigned(r) & 1))
      out += fmt::format(" {}@{}", x86::reg_name(r), slot);
    else
      out += fmt::format(" {}@[{}{:+}]", x86::reg_name(r), x86::reg_name(aligned),
                         slot + aligned_depth);
  }
  return out;
}

} // namespace ehelf::synth
