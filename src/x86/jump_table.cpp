// x86::recognise_jump_table: a small forward evaluation of the path's registers in a domain
// just big enough for switch dispatch code: constants, `constant + scale * index` addresses, and
// the entries loaded from such an address (plus a constant base when added).
#include "x86/jump_table.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "x86/zydis_registers.hpp"

namespace ehelf::x86 {

namespace {

constexpr uint32_t kMaxEntries = 1u << 16;

// What the evaluation knows about a register. The "index" is the one unknown quantity the
// dispatch computes with (the switch's value): an unknown register used in an address stands
// for it.
struct Value {
  enum class Kind : uint8_t { unknown, linear, entry };
  Kind kind = Kind::unknown;
  int64_t constant = 0; // linear: the constant term; entry: the table's address
  uint8_t scale = 0;    // linear: the index's factor (0: a plain constant)
  uint8_t width = 0;    // entry: 4 or 8 bytes
  bool sign_extended = false;
  bool based = false; // entry: `base` was added to it
  int64_t base = 0;

  static Value linear(int64_t c, uint8_t s = 0) { return {Kind::linear, c, s}; }
  bool is_constant() const { return kind == Kind::linear && scale == 0; }
};

struct Evaluator {
  ZydisDecoder decoder;
  std::array<Value, kGprCount> regs{};

  Evaluator() { ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64); }

  // base + index * scale + disp of a memory operand, or unknown.
  Value address(const ZydisDecodedInstruction& d, const ZydisDecodedOperand& op,
                uint64_t at) const {
    if (op.mem.segment == ZYDIS_REGISTER_FS || op.mem.segment == ZYDIS_REGISTER_GS) return {};
    if (op.mem.base == ZYDIS_REGISTER_RIP) {
      ZyanU64 target = 0;
      if (op.mem.index != ZYDIS_REGISTER_NONE ||
          !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d, &op, at, &target)))
        return {};
      return Value::linear(int64_t(target));
    }
    int64_t constant = op.mem.disp.value;
    unsigned scale = 0, indexed_terms = 0;
    auto term = [&](ZydisRegister zr, unsigned factor) {
      if (zr == ZYDIS_REGISTER_NONE) return true;
      const Reg r = gpr(zr);
      if (r == Reg::none || r == Reg::rsp) return false;
      const Value& v = regs[unsigned(r)];
      if (v.kind == Value::Kind::entry) return false;
      if (v.kind == Value::Kind::unknown) {
        scale = factor;
        return ++indexed_terms <= 1;
      }
      constant += v.constant * int64_t(factor);
      if (v.scale) {
        scale = v.scale * factor;
        return ++indexed_terms <= 1;
      }
      return true;
    };
    if (!term(op.mem.base, 1) || !term(op.mem.index, op.mem.scale ? op.mem.scale : 1)) return {};
    if (scale > 8) return {};
    return Value::linear(constant, uint8_t(scale));
  }

  // The entry a `size`-byte load from `addr` gives: the address must step through a table.
  static Value load(const Value& addr, unsigned size, bool sign_extended) {
    if (addr.kind != Value::Kind::linear || addr.scale != size || (size != 4 && size != 8))
      return {};
    Value v{Value::Kind::entry, addr.constant};
    v.width = uint8_t(size);
    v.sign_extended = sign_extended;
    return v;
  }

  static Value add(const Value& a, const Value& b) {
    if (a.kind == Value::Kind::linear && b.kind == Value::Kind::linear && (!a.scale || !b.scale))
      return Value::linear(a.constant + b.constant, uint8_t(a.scale | b.scale));
    for (auto [e, c] : {std::pair{&a, &b}, std::pair{&b, &a}})
      if (e->kind == Value::Kind::entry && !e->based && c->is_constant()) {
        Value v = *e;
        v.based = true;
        v.base = c->constant;
        return v;
      }
    return {};
  }

  // A register-to-register copy of `size` bytes (a 32-bit one zero-extends).
  static Value copy(const Value& v, unsigned size) {
    if (size == 8) return v;
    if (size != 4) return {};
    if (v.is_constant()) return Value::linear(int64_t(uint32_t(v.constant)));
    if (v.kind == Value::Kind::entry && v.width == 4 && !v.based && !v.sign_extended) return v;
    return {}; // an unknown stays the index (a truncated index is still one)
  }

  // Evaluates one instruction; at the final jump, returns the table it dispatches through.
  std::optional<JumpTable> step(const ZydisDecodedInstruction& d, const ZydisDecodedOperand* ops,
                                uint64_t at) {
    const unsigned n = d.operand_count_visible;
    auto reg = [&](unsigned i) {
      return i < n && ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER ? gpr(ops[i].reg.value)
                                                                 : Reg::none;
    };
    auto is_mem = [&](unsigned i) { return i < n && ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY; };
    auto value = [&](Reg r) { return r == Reg::none ? Value{} : regs[unsigned(r)]; };
    if (d.meta.category == ZYDIS_CATEGORY_UNCOND_BR && n == 1) {
      Value target = reg(0) != Reg::none ? value(reg(0))
                     : is_mem(0)         ? load(address(d, ops[0], at), ops[0].size / 8, false)
                                         : Value{};
      if (target.kind != Value::Kind::entry) return std::nullopt;
      JumpTable t{uint64_t(target.constant), 0, target.width, target.sign_extended, target.based,
                  uint64_t(target.base)};
      if (t.relative ? t.entry_size == 4 && t.sign_extended : t.entry_size == 8) return t;
      return std::nullopt;
    }
    const Reg dst = reg(0);
    const unsigned dst_size = n ? ops[0].size / 8 : 0;
    std::optional<Value> result; // the new value of dst when the instruction is understood
    switch (d.mnemonic) {
    case ZYDIS_MNEMONIC_LEA:
      if (dst != Reg::none && dst_size == 8 && is_mem(1)) result = address(d, ops[1], at);
      break;
    case ZYDIS_MNEMONIC_MOV:
      if (dst == Reg::none) break;
      if (reg(1) != Reg::none)
        result = copy(value(reg(1)), dst_size);
      else if (is_mem(1))
        result = load(address(d, ops[1], at), dst_size, false);
      else if (n == 2 && ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
        result = dst_size == 8 ? Value::linear(ops[1].imm.value.s)
                               : Value::linear(int64_t(uint32_t(ops[1].imm.value.u)));
      break;
    case ZYDIS_MNEMONIC_MOVSXD:
      if (dst == Reg::none || dst_size != 8) break;
      if (is_mem(1) && ops[1].size == 32) {
        result = load(address(d, ops[1], at), 4, true);
      } else if (Value v = value(reg(1)); v.kind == Value::Kind::entry && v.width == 4) {
        v.sign_extended = true;
        result = v;
      }
      break;
    case ZYDIS_MNEMONIC_CDQE:
      if (Value v = regs[unsigned(Reg::rax)]; v.kind == Value::Kind::entry && v.width == 4) {
        v.sign_extended = true;
        regs[unsigned(Reg::rax)] = v;
        return std::nullopt;
      }
      break;
    case ZYDIS_MNEMONIC_ADD:
      if (dst == Reg::none || dst_size != 8) break;
      if (reg(1) != Reg::none)
        result = add(value(dst), value(reg(1)));
      else if (n == 2 && ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
        result = add(value(dst), Value::linear(ops[1].imm.value.s));
      break;
    default:
      break;
    }
    // Every register the instruction writes (hidden operands too) is unknown unless understood.
    for (unsigned i = 0; i < d.operand_count; ++i)
      if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
          (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
        if (Reg r = gpr(ops[i].reg.value); r != Reg::none) regs[unsigned(r)] = {};
    if (result && dst != Reg::none) regs[unsigned(dst)] = *result;
    return std::nullopt;
  }
};

// Entries the last bound check before the jump lets through: `cmp $N,x` (or clang -O0's
// `sub $N,x`, which sets the flags alike) directly followed by a branch whose in-range side the
// path takes (ja/jae fall through, jbe/jb taken).
uint32_t bound(const ZydisDecoder& decoder, std::span<const PathInstruction> path) {
  uint32_t entries = 0;
  for (size_t i = 0; i + 2 < path.size(); ++i) {
    ZydisDecodedInstruction cmp, jcc;
    ZydisDecodedOperand cops[ZYDIS_MAX_OPERAND_COUNT], jops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, path[i].code.data(),
                                             std::min<size_t>(path[i].code.size(), 15), &cmp,
                                             cops)) ||
        (cmp.mnemonic != ZYDIS_MNEMONIC_CMP && cmp.mnemonic != ZYDIS_MNEMONIC_SUB) ||
        cmp.operand_count_visible != 2 || cops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
        cops[1].imm.value.s < 0)
      continue;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, path[i + 1].code.data(),
                                             std::min<size_t>(path[i + 1].code.size(), 15), &jcc,
                                             jops)) ||
        path[i + 1].address != path[i].address + cmp.length)
      continue;
    const bool falls_through = path[i + 2].address == path[i + 1].address + jcc.length;
    const uint64_t n = cops[1].imm.value.u;
    uint64_t count = 0;
    if (jcc.mnemonic == ZYDIS_MNEMONIC_JNBE || jcc.mnemonic == ZYDIS_MNEMONIC_JBE)
      count = (jcc.mnemonic == ZYDIS_MNEMONIC_JNBE) == falls_through ? n + 1 : 0;
    else if (jcc.mnemonic == ZYDIS_MNEMONIC_JNB || jcc.mnemonic == ZYDIS_MNEMONIC_JB)
      count = (jcc.mnemonic == ZYDIS_MNEMONIC_JNB) == falls_through ? n : 0;
    else
      continue;
    entries = count <= kMaxEntries ? uint32_t(count) : 0;
  }
  return entries;
}

} // namespace

std::optional<JumpTable> recognise_jump_table(std::span<const PathInstruction> path) {
  Evaluator e;
  std::optional<JumpTable> table;
  for (size_t i = 0; i < path.size(); ++i) {
    ZydisDecodedInstruction d;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&e.decoder, path[i].code.data(),
                                             std::min<size_t>(path[i].code.size(), 15), &d, ops)))
      return std::nullopt;
    table = e.step(d, ops, path[i].address);
    if (table && i + 1 != path.size()) return std::nullopt;
  }
  if (!table) return std::nullopt;
  table->entries = bound(e.decoder, path);
  if (!table->entries) return std::nullopt;
  return table;
}

} // namespace ehelf::x86
