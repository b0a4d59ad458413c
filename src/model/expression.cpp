#include "model/expression.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include <fmt/format.h>

#include "model/dw_op.hpp"
#include "model/registers.hpp"
#include "support/byte_cursor.hpp"

// Operand layout beyond what the header lists (all stored in ExprOp::a / ExprOp::b):
//   implicit_pointer, GNU_implicit_pointer: a = DIE offset, b = signed byte offset
//   const_type, GNU_const_type:            a = type DIE offset, b = length (the bytes follow)
//   regval_type, GNU_regval_type:          a = register, b = type DIE offset
//   deref_type, xderef_type, GNU_deref_type: a = size, b = type DIE offset
//   convert, reinterpret (and GNU_):       a = type DIE offset (0 = generic type)
//   addrx, constx, GNU_addr_index, GNU_const_index: a = index into .debug_addr
//   GNU_parameter_ref:                     a = DIE offset;  GNU_variable_value: a = DIE offset
//   entry_value:                           a = length of the sub-expression (the bytes follow)
// Whenever bytes follow the operands (implicit_value, entry_value, const_type) they end exactly
// where the next op starts, so they are found again from the op boundaries without storing them.

namespace ehelf {
namespace {
// Offsets into .debug_info in call_ref, implicit_pointer and variable_value are offset_size
// bytes; CFI has no unit header to tell, and .eh_frame is always 32-bit DWARF.
constexpr unsigned kOffsetSize = 4;

// entry_value sub-expressions nest; each level costs at least two bytes, so without a cap a long
// crafted input could recurse thousands of frames deep.
constexpr int kMaxNesting = 8;

uint64_t read_sized(ByteCursor& c, unsigned size) {
  switch (size) {
  case 1:
    return c.u8();
  case 2:
    return c.u16();
  case 4:
    return c.u32();
  default:
    return c.u64();
  }
}

// Reads the operands of forms made of fixed-size and LEB128 fields into op.a / op.b; false for
// the forms whose decoding needs more (branches, blocks, sub-expressions, typed constants,
// offsets, unknown opcodes), which each decoder handles itself.
bool read_plain_operands(ByteCursor& c, DwOpForm form, uint8_t address_size, ExprOp& op) {
  switch (form) {
  case DwOpForm::None:
    return true;
  case DwOpForm::Addr:
    op.a = read_sized(c, address_size);
    return true;
  case DwOpForm::U8:
    op.a = c.u8();
    return true;
  case DwOpForm::S8:
    op.a = static_cast<uint64_t>(int64_t{c.s8()});
    return true;
  case DwOpForm::U16:
    op.a = c.u16();
    return true;
  case DwOpForm::S16:
    op.a = static_cast<uint64_t>(int64_t{c.s16()});
    return true;
  case DwOpForm::U32:
    op.a = c.u32();
    return true;
  case DwOpForm::S32:
    op.a = static_cast<uint64_t>(int64_t{c.s32()});
    return true;
  case DwOpForm::U64:
    op.a = c.u64();
    return true;
  case DwOpForm::S64:
    op.a = static_cast<uint64_t>(c.s64());
    return true;
  case DwOpForm::Uleb:
    op.a = c.uleb();
    return true;
  case DwOpForm::Sleb:
    op.a = static_cast<uint64_t>(c.sleb());
    return true;
  case DwOpForm::UlebSleb:
    op.a = c.uleb();
    op.b = static_cast<uint64_t>(c.sleb());
    return true;
  case DwOpForm::UlebUleb:
    op.a = c.uleb();
    op.b = c.uleb();
    return true;
  case DwOpForm::U8Uleb:
    op.a = c.u8();
    op.b = c.uleb();
    return true;
  default:
    return false;
  }
}

// Decodes `bytes` (which start `base` bytes into the outermost expression) into ops with offsets
// relative to the outermost expression, and checks nested sub-expressions the same way.
Status decode_ops(std::span<const uint8_t> bytes, uint32_t base, uint8_t address_size, int depth,
                  std::vector<ExprOp>& out) {
  ByteCursor c(bytes);
  std::vector<ExprOp> ops;
  std::vector<size_t> branches; // indices into ops of skip/bra, resolved once all offsets are known
  while (!c.at_end()) {
    ExprOp op;
    op.offset = static_cast<uint32_t>(c.pos());
    op.opcode = c.u8();
    DwOpForm form = dw_op_form(op.opcode);
    std::string_view name = dw_op_name(op.opcode);
    auto truncated = [&] {
      return Error::at("", base + op.offset, fmt::format("truncated operand of {}", name));
    };
    switch (form) {
    case DwOpForm::Unknown:
      return Error::at("", base + op.offset,
                       fmt::format("unknown DWARF expression opcode {:#04x}", op.opcode));
    default:
      if (!read_plain_operands(c, form, address_size, op)) return truncated();
      break;
    case DwOpForm::Branch:
      op.a = static_cast<uint64_t>(int64_t{c.s16()});
      branches.push_back(ops.size());
      break;
    case DwOpForm::Block:
      op.a = c.uleb();
      c.skip(op.a);
      break;
    case DwOpForm::SubExpr: {
      op.a = c.uleb();
      size_t start = c.pos();
      auto sub = c.bytes(op.a);
      if (!c.ok()) return truncated();
      if (depth >= kMaxNesting)
        return Error::at("", base + op.offset, fmt::format("{} nested too deeply", name));
      // The nested ops are only checked here; to_string decodes them again when printing.
      std::vector<ExprOp> nested;
      auto st =
          decode_ops(sub, base + static_cast<uint32_t>(start), address_size, depth + 1, nested);
      if (!st) return std::move(st).error();
      break;
    }
    case DwOpForm::TypedConst:
      op.a = c.uleb();
      op.b = c.u8();
      c.skip(op.b);
      break;
    case DwOpForm::Offset:
      op.a = read_sized(c, kOffsetSize);
      break;
    case DwOpForm::OffsetSleb:
      op.a = read_sized(c, kOffsetSize);
      op.b = static_cast<uint64_t>(c.sleb());
      break;
    }
    if (!c.ok()) return truncated();
    ops.push_back(op);
  }

  for (size_t i : branches) {
    ExprOp& op = ops[i];
    // The displacement counts from the end of the 3-byte skip/bra.
    int64_t target = int64_t{op.offset} + 3 + static_cast<int64_t>(op.a);
    if (target == static_cast<int64_t>(bytes.size())) {
      op.b = ops.size();
      continue;
    }
    auto it = std::lower_bound(ops.begin(), ops.end(), target,
                               [](const ExprOp& o, int64_t t) { return int64_t{o.offset} < t; });
    if (target < 0 || it == ops.end() || int64_t{it->offset} != target)
      return Error::at(
          "", base + op.offset,
          fmt::format("{} target {} is not the start of an op", dw_op_name(op.opcode),
                      target < 0 ? fmt::format("-{:#x}", -target) : fmt::format("{:#x}", target)));
    op.b = static_cast<uint64_t>(it - ops.begin());
  }
  for (auto& op : ops)
    op.offset += base;
  out = std::move(ops);
  return Ok{};
}

int64_t as_signed(uint64_t v) {
  return static_cast<int64_t>(v);
}

uint64_t shift_left(uint64_t v, uint64_t n) {
  return n >= 64 ? 0 : v << n;
}
uint64_t shift_right(uint64_t v, uint64_t n) {
  return n >= 64 ? 0 : v >> n;
}
uint64_t shift_right_arith(uint64_t v, uint64_t n) {
  uint64_t fill = (v >> 63) ? ~uint64_t{0} : 0;
  if (n >= 64) return fill;
  if (n == 0) return v;
  return (v >> n) | (fill << (64 - n));
}

// The evaluation stack: inline storage for the common case so that evaluating a rule (done for
// every frame of every unwind) does not allocate; deeper stacks, if the limits allow them, spill
// to the heap.
class EvalStack {
public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint64_t& back() { return data()[size_ - 1]; }
  uint64_t& operator[](size_t i) { return data()[i]; }
  void pop_back() {
    --size_;
    if (spilled_) heap_.pop_back();
  }
  void push_back(uint64_t v) {
    if (!spilled_ && size_ < inline_.size()) {
      inline_[size_++] = v;
      return;
    }
    if (!spilled_) {
      heap_.assign(inline_.begin(), inline_.end());
      spilled_ = true;
    }
    heap_.push_back(v);
    ++size_;
  }

private:
  uint64_t* data() { return spilled_ ? heap_.data() : inline_.data(); }

  std::array<uint64_t, 64> inline_;
  std::vector<uint64_t> heap_; // once spilled, holds the whole stack
  size_t size_ = 0;
  bool spilled_ = false;
};

} // namespace

Result<Expression> Expression::decode(std::span<const uint8_t> bytes, uint8_t address_size) {
  if (address_size != 1 && address_size != 2 && address_size != 4 && address_size != 8)
    return Error::plain(fmt::format("unsupported address size {}", address_size));
  if (bytes.size() > std::numeric_limits<uint32_t>::max())
    return Error::plain(fmt::format("expression of {} bytes is too long", bytes.size()));
  Expression e;
  auto st = decode_ops(bytes, 0, address_size, 0, e.ops_);
  if (!st) return std::move(st).error();
  e.bytes_.assign(bytes.begin(), bytes.end());
  e.address_size_ = address_size;
  return e;
}

Result<uint64_t> Expression::evaluate(const RegisterState& regs, MemoryReader& mem,
                                      std::optional<uint64_t> initial, std::optional<uint64_t> cfa,
                                      const EvalLimits& limits) const {
  return evaluate_ops(ops_, address_size_, regs, mem, initial, cfa, limits);
}

bool Expression::decode_fixed(std::span<const uint8_t> bytes, FixedOps& out) {
  out.count = 0;
  ByteCursor c(bytes);
  while (!c.at_end()) {
    if (out.count == FixedOps::kMaxOps) return false;
    ExprOp& op = out.ops[out.count];
    op = ExprOp{};
    op.offset = static_cast<uint32_t>(c.pos());
    op.opcode = c.u8();
    const DwOpForm form = dw_op_form(op.opcode);
    switch (form) {
    case DwOpForm::Branch:
      op.a = static_cast<uint64_t>(int64_t{c.s16()});
      break;
    default:
      // Blocks, sub-expressions, typed constants and unknown opcodes: not in CFI rules.
      if (!read_plain_operands(c, form, 8, op)) return false;
    }
    if (!c.ok()) return false;
    ++out.count;
  }
  // Branch targets as op indices, as decode() resolves them.
  for (size_t i = 0; i < out.count; ++i) {
    ExprOp& op = out.ops[i];
    if (dw_op_form(op.opcode) != DwOpForm::Branch) continue;
    int64_t target = int64_t{op.offset} + 3 + static_cast<int64_t>(op.a);
    op.b = out.count; // the end
    if (target == static_cast<int64_t>(bytes.size())) continue;
    size_t j = 0;
    while (j < out.count && int64_t{out.ops[j].offset} != target)
      ++j;
    if (j == out.count) return false;
    op.b = j;
  }
  return true;
}

Result<uint64_t> Expression::evaluate_ops(std::span<const ExprOp> ops_, uint8_t address_size_,
                                          const RegisterState& regs, MemoryReader& mem,
                                          std::optional<uint64_t> initial,
                                          std::optional<uint64_t> cfa, const EvalLimits& limits) {
  EvalStack stack;
  if (initial) {
    if (limits.max_stack == 0)
      return limits.messages ? Error::plain("stack overflow pushing the initial value")
                             : Error::quiet(ErrorKind::Other);
    stack.push_back(*initial);
  }

  uint32_t steps = 0;
  size_t pc = 0;
  while (pc < ops_.size()) {
    const ExprOp& op = ops_[pc];
    // Only error paths use the name; looking it up is cheap (a table index).
    std::string_view name = dw_op_name(op.opcode);
    // `describe` builds the message only when messages are wanted (it allocates).
    auto fail = [&](ErrorKind kind, auto&& describe) {
      if (!limits.messages) return Error::quiet(kind);
      return Error::at("", op.offset, std::string(describe())).with_kind(kind);
    };
    if (++steps > limits.max_steps)
      return fail(ErrorKind::Other, [&] {
        return fmt::format("step limit ({}) reached at {}", limits.max_steps, name);
      });

    // Operand checks up front, so each case below can pop and push freely.
    auto need = [&](size_t n) { return stack.size() >= n; };
    auto underflow = [&](size_t n) {
      return fail(ErrorKind::Other, [&] {
        return fmt::format("stack underflow: {} needs {} value{}, stack has {}", name, n,
                           n == 1 ? "" : "s", stack.size());
      });
    };
    auto push = [&](uint64_t v) -> bool {
      if (stack.size() >= limits.max_stack) return false;
      stack.push_back(v);
      return true;
    };
    auto overflow = [&] {
      return fail(ErrorKind::Other, [&] {
        return fmt::format("stack overflow: {} exceeds {} entries", name, limits.max_stack);
      });
    };
    auto pop = [&] {
      uint64_t v = stack.back();
      stack.pop_back();
      return v;
    };
    auto read_mem = [&](uint64_t addr, unsigned size) -> Result<uint64_t> {
      uint64_t v = 0; // zero-extends: x86_64 is little-endian, so the low bytes come first
      if (!mem.read(addr, &v, size))
        return fail(ErrorKind::BadRead, [&] {
          return fmt::format("{}: cannot read {} byte{} at {:#x}", name, size, size == 1 ? "" : "s",
                             addr);
        });
      return v;
    };

    uint8_t code = op.opcode;
    size_t next = pc + 1;
    if (code >= OP_lit0 && code <= OP_lit31) {
      if (!push(code - OP_lit0)) return overflow();
    } else if (code >= OP_breg0 && code <= OP_breg31) {
      unsigned r = code - OP_breg0;
      if (!regs.has(r))
        return fail(ErrorKind::MissingRegister, [&] {
          return fmt::format("{}: register {} has no known value", name, x86_64::register_label(r));
        });
      if (!push(regs.get(r) + op.a)) return overflow();
    } else if (code >= OP_reg0 && code <= OP_reg31) {
      return fail(ErrorKind::Other, [&] {
        return fmt::format("{} names a register location, which is not valid in CFI", name);
      });
    } else {
      switch (code) {
      case OP_addr:
      case OP_const1u:
      case OP_const1s:
      case OP_const2u:
      case OP_const2s:
      case OP_const4u:
      case OP_const4s:
      case OP_const8u:
      case OP_const8s:
      case OP_constu:
      case OP_consts:
        if (!push(op.a)) return overflow();
        break;
      case OP_bregx:
        if (op.a >= x86_64::kGeneralRegs || !regs.has(static_cast<unsigned>(op.a)))
          return fail(ErrorKind::MissingRegister, [&] {
            return fmt::format("{}: register {} ({}) has no known value", name, op.a,
                               x86_64::register_label(op.a));
          });
        if (!push(regs.get(static_cast<unsigned>(op.a)) + op.b)) return overflow();
        break;
      case OP_dup:
        if (!need(1)) return underflow(1);
        if (!push(stack.back())) return overflow();
        break;
      case OP_drop:
        if (!need(1)) return underflow(1);
        stack.pop_back();
        break;
      case OP_over:
        if (!need(2)) return underflow(2);
        if (!push(stack[stack.size() - 2])) return overflow();
        break;
      case OP_pick:
        if (op.a >= stack.size())
          return fail(ErrorKind::Other, [&] {
            return fmt::format("{} {}: stack has only {} value{}", name, op.a, stack.size(),
                               stack.size() == 1 ? "" : "s");
          });
        if (!push(stack[stack.size() - 1 - op.a])) return overflow();
        break;
      case OP_swap:
        if (!need(2)) return underflow(2);
        std::swap(stack[stack.size() - 1], stack[stack.size() - 2]);
        break;
      case OP_rot: {
        // The top becomes third, the second becomes top, the third becomes second.
        if (!need(3)) return underflow(3);
        size_t n = stack.size();
        uint64_t top = stack[n - 1];
        stack[n - 1] = stack[n - 2];
        stack[n - 2] = stack[n - 3];
        stack[n - 3] = top;
        break;
      }
      case OP_deref: {
        if (!need(1)) return underflow(1);
        auto v = read_mem(stack.back(), address_size_);
        if (!v) return std::move(v).error();
        stack.back() = *v;
        break;
      }
      case OP_deref_size: {
        if (!need(1)) return underflow(1);
        if (op.a == 0 || op.a > address_size_)
          return fail(ErrorKind::Other, [&] {
            return fmt::format("{}: size {} is not between 1 and the address size {}", name, op.a,
                               address_size_);
          });
        auto v = read_mem(stack.back(), static_cast<unsigned>(op.a));
        if (!v) return std::move(v).error();
        stack.back() = *v;
        break;
      }
      case OP_abs:
        if (!need(1)) return underflow(1);
        if (as_signed(stack.back()) < 0) stack.back() = 0 - stack.back();
        break;
      case OP_neg:
        if (!need(1)) return underflow(1);
        stack.back() = 0 - stack.back();
        break;
      case OP_not:
        if (!need(1)) return underflow(1);
        stack.back() = ~stack.back();
        break;
      case OP_plus_uconst:
        if (!need(1)) return underflow(1);
        stack.back() += op.a;
        break;
      case OP_and:
      case OP_div:
      case OP_minus:
      case OP_mod:
      case OP_mul:
      case OP_or:
      case OP_plus:
      case OP_shl:
      case OP_shr:
      case OP_shra:
      case OP_xor:
      case OP_eq:
      case OP_ge:
      case OP_gt:
      case OP_le:
      case OP_lt:
      case OP_ne: {
        if (!need(2)) return underflow(2);
        uint64_t top = pop();
        uint64_t second = stack.back(); // binary ops compute `second OP top`
        int64_t s_top = as_signed(top), s_second = as_signed(second);
        uint64_t r = 0;
        switch (code) {
        case OP_and:
          r = second & top;
          break;
        case OP_or:
          r = second | top;
          break;
        case OP_xor:
          r = second ^ top;
          break;
        case OP_plus:
          r = second + top;
          break;
        case OP_minus:
          r = second - top;
          break;
        case OP_mul:
          r = second * top;
          break;
        case OP_div:
          if (top == 0)
            return fail(ErrorKind::Other, [&] { return "DW_OP_div: division by zero"; });
          // INT64_MIN / -1 overflows; the modular answer is INT64_MIN itself.
          r = s_top == -1 ? 0 - second : static_cast<uint64_t>(s_second / s_top);
          break;
        case OP_mod:
          if (top == 0) return fail(ErrorKind::Other, [&] { return "DW_OP_mod: modulo by zero"; });
          r = second % top;
          break;
        case OP_shl:
          r = shift_left(second, top);
          break;
        case OP_shr:
          r = shift_right(second, top);
          break;
        case OP_shra:
          r = shift_right_arith(second, top);
          break;
        case OP_eq:
          r = s_second == s_top;
          break;
        case OP_ge:
          r = s_second >= s_top;
          break;
        case OP_gt:
          r = s_second > s_top;
          break;
        case OP_le:
          r = s_second <= s_top;
          break;
        case OP_lt:
          r = s_second < s_top;
          break;
        case OP_ne:
          r = s_second != s_top;
          break;
        default:
          break;
        }
        stack.back() = r;
        break;
      }
      case OP_skip:
        next = op.b;
        break;
      case OP_bra:
        if (!need(1)) return underflow(1);
        if (pop() != 0) next = op.b;
        break;
      case OP_nop:
        break;
      case OP_call_frame_cfa:
        if (!cfa)
          return fail(ErrorKind::MissingRegister,
                      [&] { return "DW_OP_call_frame_cfa: no CFA is known here"; });
        if (!push(*cfa)) return overflow();
        break;
      case OP_regx:
      case OP_piece:
      case OP_bit_piece:
      case OP_implicit_value:
      case OP_stack_value:
      case OP_implicit_pointer:
      case OP_GNU_implicit_pointer:
        return fail(ErrorKind::Other, [&] {
          return fmt::format("{} describes a location, which is not valid in CFI", name);
        });
      case OP_fbreg:
      case OP_call2:
      case OP_call4:
      case OP_call_ref:
      case OP_push_object_address:
      case OP_entry_value:
      case OP_GNU_entry_value:
      case OP_GNU_parameter_ref:
      case OP_GNU_variable_value:
        return fail(ErrorKind::Other, [&] {
          return fmt::format("{} needs debug information context, which is not valid in CFI", name);
        });
      case OP_form_tls_address:
      case OP_GNU_push_tls_address:
        return fail(ErrorKind::Other, [&] {
          return fmt::format("{} needs thread-local storage, which is not valid in CFI", name);
        });
      case OP_addrx:
      case OP_constx:
      case OP_GNU_addr_index:
      case OP_GNU_const_index:
        return fail(ErrorKind::Other, [&] {
          return fmt::format("{} needs .debug_addr, which is not valid in CFI", name);
        });
      case OP_xderef:
      case OP_xderef_size:
      case OP_xderef_type:
        return fail(ErrorKind::Other, [&] {
          return fmt::format("{} needs address spaces, which x86_64 does not have", name);
        });
      default:
        // Typed-stack ops (const_type, regval_type, deref_type, convert, reinterpret) and
        // DW_OP_GNU_uninit.
        return fail(ErrorKind::Other,
                    [&] { return fmt::format("{} is not supported in CFI expressions", name); });
      }
    }
    pc = next;
  }

  if (stack.empty())
    return limits.messages ? Error::plain("expression left the stack empty")
                           : Error::quiet(ErrorKind::Other);
  return stack.back();
}

} // namespace ehelf
