#include "model/expression.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include <fmt/format.h>

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

enum : uint8_t {
  OP_addr = 0x03,
  OP_deref = 0x06,
  OP_const1u = 0x08,
  OP_const1s = 0x09,
  OP_const2u = 0x0a,
  OP_const2s = 0x0b,
  OP_const4u = 0x0c,
  OP_const4s = 0x0d,
  OP_const8u = 0x0e,
  OP_const8s = 0x0f,
  OP_constu = 0x10,
  OP_consts = 0x11,
  OP_dup = 0x12,
  OP_drop = 0x13,
  OP_over = 0x14,
  OP_pick = 0x15,
  OP_swap = 0x16,
  OP_rot = 0x17,
  OP_xderef = 0x18,
  OP_abs = 0x19,
  OP_and = 0x1a,
  OP_div = 0x1b,
  OP_minus = 0x1c,
  OP_mod = 0x1d,
  OP_mul = 0x1e,
  OP_neg = 0x1f,
  OP_not = 0x20,
  OP_or = 0x21,
  OP_plus = 0x22,
  OP_plus_uconst = 0x23,
  OP_shl = 0x24,
  OP_shr = 0x25,
  OP_shra = 0x26,
  OP_xor = 0x27,
  OP_bra = 0x28,
  OP_eq = 0x29,
  OP_ge = 0x2a,
  OP_gt = 0x2b,
  OP_le = 0x2c,
  OP_lt = 0x2d,
  OP_ne = 0x2e,
  OP_skip = 0x2f,
  OP_lit0 = 0x30,
  OP_lit31 = 0x4f,
  OP_reg0 = 0x50,
  OP_reg31 = 0x6f,
  OP_breg0 = 0x70,
  OP_breg31 = 0x8f,
  OP_regx = 0x90,
  OP_fbreg = 0x91,
  OP_bregx = 0x92,
  OP_piece = 0x93,
  OP_deref_size = 0x94,
  OP_xderef_size = 0x95,
  OP_nop = 0x96,
  OP_push_object_address = 0x97,
  OP_call2 = 0x98,
  OP_call4 = 0x99,
  OP_call_ref = 0x9a,
  OP_form_tls_address = 0x9b,
  OP_call_frame_cfa = 0x9c,
  OP_bit_piece = 0x9d,
  OP_implicit_value = 0x9e,
  OP_stack_value = 0x9f,
  OP_implicit_pointer = 0xa0,
  OP_addrx = 0xa1,
  OP_constx = 0xa2,
  OP_entry_value = 0xa3,
  OP_const_type = 0xa4,
  OP_regval_type = 0xa5,
  OP_deref_type = 0xa6,
  OP_xderef_type = 0xa7,
  OP_convert = 0xa8,
  OP_reinterpret = 0xa9,
  OP_GNU_push_tls_address = 0xe0,
  OP_GNU_uninit = 0xf0,
  OP_GNU_implicit_pointer = 0xf2,
  OP_GNU_entry_value = 0xf3,
  OP_GNU_const_type = 0xf4,
  OP_GNU_regval_type = 0xf5,
  OP_GNU_deref_type = 0xf6,
  OP_GNU_convert = 0xf7,
  OP_GNU_reinterpret = 0xf9,
  OP_GNU_parameter_ref = 0xfa,
  OP_GNU_addr_index = 0xfb,
  OP_GNU_const_index = 0xfc,
  OP_GNU_variable_value = 0xfd,
};

// How the operands of an opcode are encoded.
enum class Form : uint8_t {
  Unknown, // not an opcode we decode
  None,    // no operand
  Addr,    // address_size bytes
  U8,
  S8,
  U16,
  S16,
  U32,
  S32,
  U64,
  S64,
  Uleb,
  Sleb,
  UlebSleb,   // bregx
  UlebUleb,   // bit_piece, regval_type
  U8Uleb,     // deref_type, xderef_type
  Branch,     // skip, bra: signed 2-byte displacement
  Block,      // implicit_value: uleb length, then that many bytes
  SubExpr,    // entry_value: uleb length, then a nested expression
  TypedConst, // const_type: uleb type, 1-byte length, then that many bytes
  Offset,     // a .debug_info offset; CFI does not say whether DWARF64, so 4 bytes (DWARF32)
  OffsetSleb, // implicit_pointer
};

// Offsets into .debug_info in call_ref, implicit_pointer and variable_value are offset_size
// bytes; CFI has no unit header to tell, and .eh_frame is always 32-bit DWARF.
constexpr unsigned kOffsetSize = 4;

// entry_value sub-expressions nest; each level costs at least two bytes, so without a cap a long
// crafted input could recurse thousands of frames deep.
constexpr int kMaxNesting = 8;

struct OpTable {
  std::array<std::string, 256> names;
  std::array<Form, 256> forms{};
};

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    auto def = [&t](uint8_t op, const char* name, Form form) {
      t.names[op] = name;
      t.forms[op] = form;
    };
    def(OP_addr, "DW_OP_addr", Form::Addr);
    def(OP_deref, "DW_OP_deref", Form::None);
    def(OP_const1u, "DW_OP_const1u", Form::U8);
    def(OP_const1s, "DW_OP_const1s", Form::S8);
    def(OP_const2u, "DW_OP_const2u", Form::U16);
    def(OP_const2s, "DW_OP_const2s", Form::S16);
    def(OP_const4u, "DW_OP_const4u", Form::U32);
    def(OP_const4s, "DW_OP_const4s", Form::S32);
    def(OP_const8u, "DW_OP_const8u", Form::U64);
    def(OP_const8s, "DW_OP_const8s", Form::S64);
    def(OP_constu, "DW_OP_constu", Form::Uleb);
    def(OP_consts, "DW_OP_consts", Form::Sleb);
    def(OP_dup, "DW_OP_dup", Form::None);
    def(OP_drop, "DW_OP_drop", Form::None);
    def(OP_over, "DW_OP_over", Form::None);
    def(OP_pick, "DW_OP_pick", Form::U8);
    def(OP_swap, "DW_OP_swap", Form::None);
    def(OP_rot, "DW_OP_rot", Form::None);
    def(OP_xderef, "DW_OP_xderef", Form::None);
    def(OP_abs, "DW_OP_abs", Form::None);
    def(OP_and, "DW_OP_and", Form::None);
    def(OP_div, "DW_OP_div", Form::None);
    def(OP_minus, "DW_OP_minus", Form::None);
    def(OP_mod, "DW_OP_mod", Form::None);
    def(OP_mul, "DW_OP_mul", Form::None);
    def(OP_neg, "DW_OP_neg", Form::None);
    def(OP_not, "DW_OP_not", Form::None);
    def(OP_or, "DW_OP_or", Form::None);
    def(OP_plus, "DW_OP_plus", Form::None);
    def(OP_plus_uconst, "DW_OP_plus_uconst", Form::Uleb);
    def(OP_shl, "DW_OP_shl", Form::None);
    def(OP_shr, "DW_OP_shr", Form::None);
    def(OP_shra, "DW_OP_shra", Form::None);
    def(OP_xor, "DW_OP_xor", Form::None);
    def(OP_bra, "DW_OP_bra", Form::Branch);
    def(OP_eq, "DW_OP_eq", Form::None);
    def(OP_ge, "DW_OP_ge", Form::None);
    def(OP_gt, "DW_OP_gt", Form::None);
    def(OP_le, "DW_OP_le", Form::None);
    def(OP_lt, "DW_OP_lt", Form::None);
    def(OP_ne, "DW_OP_ne", Form::None);
    def(OP_skip, "DW_OP_skip", Form::Branch);
    for (unsigned i = 0; i < 32; ++i) {
      t.names[OP_lit0 + i] = fmt::format("DW_OP_lit{}", i);
      t.forms[OP_lit0 + i] = Form::None;
      t.names[OP_reg0 + i] = fmt::format("DW_OP_reg{}", i);
      t.forms[OP_reg0 + i] = Form::None;
      t.names[OP_breg0 + i] = fmt::format("DW_OP_breg{}", i);
      t.forms[OP_breg0 + i] = Form::Sleb;
    }
    def(OP_regx, "DW_OP_regx", Form::Uleb);
    def(OP_fbreg, "DW_OP_fbreg", Form::Sleb);
    def(OP_bregx, "DW_OP_bregx", Form::UlebSleb);
    def(OP_piece, "DW_OP_piece", Form::Uleb);
    def(OP_deref_size, "DW_OP_deref_size", Form::U8);
    def(OP_xderef_size, "DW_OP_xderef_size", Form::U8);
    def(OP_nop, "DW_OP_nop", Form::None);
    def(OP_push_object_address, "DW_OP_push_object_address", Form::None);
    def(OP_call2, "DW_OP_call2", Form::U16);
    def(OP_call4, "DW_OP_call4", Form::U32);
    def(OP_call_ref, "DW_OP_call_ref", Form::Offset);
    def(OP_form_tls_address, "DW_OP_form_tls_address", Form::None);
    def(OP_call_frame_cfa, "DW_OP_call_frame_cfa", Form::None);
    def(OP_bit_piece, "DW_OP_bit_piece", Form::UlebUleb);
    def(OP_implicit_value, "DW_OP_implicit_value", Form::Block);
    def(OP_stack_value, "DW_OP_stack_value", Form::None);
    def(OP_implicit_pointer, "DW_OP_implicit_pointer", Form::OffsetSleb);
    def(OP_addrx, "DW_OP_addrx", Form::Uleb);
    def(OP_constx, "DW_OP_constx", Form::Uleb);
    def(OP_entry_value, "DW_OP_entry_value", Form::SubExpr);
    def(OP_const_type, "DW_OP_const_type", Form::TypedConst);
    def(OP_regval_type, "DW_OP_regval_type", Form::UlebUleb);
    def(OP_deref_type, "DW_OP_deref_type", Form::U8Uleb);
    def(OP_xderef_type, "DW_OP_xderef_type", Form::U8Uleb);
    def(OP_convert, "DW_OP_convert", Form::Uleb);
    def(OP_reinterpret, "DW_OP_reinterpret", Form::Uleb);
    def(OP_GNU_push_tls_address, "DW_OP_GNU_push_tls_address", Form::None);
    def(OP_GNU_uninit, "DW_OP_GNU_uninit", Form::None);
    def(OP_GNU_implicit_pointer, "DW_OP_GNU_implicit_pointer", Form::OffsetSleb);
    def(OP_GNU_entry_value, "DW_OP_GNU_entry_value", Form::SubExpr);
    def(OP_GNU_const_type, "DW_OP_GNU_const_type", Form::TypedConst);
    def(OP_GNU_regval_type, "DW_OP_GNU_regval_type", Form::UlebUleb);
    def(OP_GNU_deref_type, "DW_OP_GNU_deref_type", Form::U8Uleb);
    def(OP_GNU_convert, "DW_OP_GNU_convert", Form::Uleb);
    def(OP_GNU_reinterpret, "DW_OP_GNU_reinterpret", Form::Uleb);
    def(OP_GNU_parameter_ref, "DW_OP_GNU_parameter_ref", Form::U32);
    def(OP_GNU_addr_index, "DW_OP_GNU_addr_index", Form::Uleb);
    def(OP_GNU_const_index, "DW_OP_GNU_const_index", Form::Uleb);
    def(OP_GNU_variable_value, "DW_OP_GNU_variable_value", Form::Offset);
    return t;
  }();
  return table;
}

Form form_of(uint8_t op) {
  return op_table().forms[op];
}

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
bool read_plain_operands(ByteCursor& c, Form form, uint8_t address_size, ExprOp& op) {
  switch (form) {
  case Form::None:
    return true;
  case Form::Addr:
    op.a = read_sized(c, address_size);
    return true;
  case Form::U8:
    op.a = c.u8();
    return true;
  case Form::S8:
    op.a = static_cast<uint64_t>(int64_t{c.s8()});
    return true;
  case Form::U16:
    op.a = c.u16();
    return true;
  case Form::S16:
    op.a = static_cast<uint64_t>(int64_t{c.s16()});
    return true;
  case Form::U32:
    op.a = c.u32();
    return true;
  case Form::S32:
    op.a = static_cast<uint64_t>(int64_t{c.s32()});
    return true;
  case Form::U64:
    op.a = c.u64();
    return true;
  case Form::S64:
    op.a = static_cast<uint64_t>(c.s64());
    return true;
  case Form::Uleb:
    op.a = c.uleb();
    return true;
  case Form::Sleb:
    op.a = static_cast<uint64_t>(c.sleb());
    return true;
  case Form::UlebSleb:
    op.a = c.uleb();
    op.b = static_cast<uint64_t>(c.sleb());
    return true;
  case Form::UlebUleb:
    op.a = c.uleb();
    op.b = c.uleb();
    return true;
  case Form::U8Uleb:
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
    Form form = form_of(op.opcode);
    std::string_view name = dw_op_name(op.opcode);
    auto truncated = [&] {
      return Error::at("", base + op.offset, fmt::format("truncated operand of {}", name));
    };
    switch (form) {
    case Form::Unknown:
      return Error::at("", base + op.offset,
                       fmt::format("unknown DWARF expression opcode {:#04x}", op.opcode));
    default:
      if (!read_plain_operands(c, form, address_size, op)) return truncated();
      break;
    case Form::Branch:
      op.a = static_cast<uint64_t>(int64_t{c.s16()});
      branches.push_back(ops.size());
      break;
    case Form::Block:
      op.a = c.uleb();
      c.skip(op.a);
      break;
    case Form::SubExpr: {
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
    case Form::TypedConst:
      op.a = c.uleb();
      op.b = c.u8();
      c.skip(op.b);
      break;
    case Form::Offset:
      op.a = read_sized(c, kOffsetSize);
      break;
    case Form::OffsetSleb:
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

// readelf prints with "%#" PRIx64, which gives "0" rather than "0x0" for zero.
std::string alt_hex(uint64_t v) {
  return v == 0 ? std::string("0") : fmt::format("{:#x}", v);
}

// readelf's regname(), which takes an unsigned int: the table name, else "r" and the number
// printed as a C int. Truncation included, so the text matches for absurd register numbers too.
std::string reg_label(uint64_t regno) {
  auto r = static_cast<unsigned>(regno);
  std::string_view name = x86_64::register_name(r);
  if (!name.empty()) return std::string(name);
  return fmt::format("r{}", static_cast<int>(r));
}

int64_t as_signed(uint64_t v) {
  return static_cast<int64_t>(v);
}

// readelf's display_block(): " N byte block: " then each byte in unpadded hex plus a space.
void append_block(std::string& out, std::span<const uint8_t> block) {
  out += fmt::format(" {} byte block: ", block.size());
  for (uint8_t b : block)
    out += fmt::format("{:x} ", b);
}

// Appends the readelf text of `bytes` (already known to decode). Where readelf gives up on the
// rest of an expression, this stops too, so the text stays identical.
void append_ops(std::string& out, std::span<const uint8_t> bytes, uint8_t address_size) {
  std::vector<ExprOp> ops;
  if (!decode_ops(bytes, 0, address_size, 0, ops)) return;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ExprOp& op = ops[i];
    size_t next = i + 1 < ops.size() ? ops[i + 1].offset : bytes.size();
    std::string_view name = dw_op_name(op.opcode);
    uint8_t code = op.opcode;
    if (code >= OP_lit0 && code <= OP_lit31) {
      out += name;
    } else if (code >= OP_reg0 && code <= OP_reg31) {
      out += fmt::format("{} ({})", name, reg_label(code - OP_reg0));
    } else if (code >= OP_breg0 && code <= OP_breg31) {
      out += fmt::format("{} ({}): {}", name, reg_label(code - OP_breg0), as_signed(op.a));
    } else {
      switch (code) {
      case OP_addr:
        out += fmt::format("{}: {:x}", name, op.a);
        break;
      case OP_const1u:
      case OP_const2u:
      case OP_const4u:
      case OP_const8u:
      case OP_constu:
      case OP_pick:
      case OP_plus_uconst:
      case OP_piece:
      case OP_deref_size:
      case OP_xderef_size:
        out += fmt::format("{}: {}", name, op.a);
        break;
      case OP_const1s:
      case OP_const2s:
      case OP_const4s:
      case OP_const8s:
      case OP_consts:
      case OP_fbreg:
      case OP_skip:
      case OP_bra:
        out += fmt::format("{}: {}", name, as_signed(op.a));
        break;
      case OP_regx:
        out += fmt::format("{}: {} ({})", name, op.a, reg_label(op.a));
        break;
      case OP_bregx:
        out += fmt::format("{}: {} ({}) {}", name, op.a, reg_label(op.a), as_signed(op.b));
        break;
      // readelf reads call2/call4 operands as signed and adds the (zero) CU offset.
      case OP_call2:
        out += fmt::format("{}: <{}>", name,
                           alt_hex(static_cast<uint64_t>(int64_t{static_cast<int16_t>(op.a)})));
        break;
      case OP_call4:
        out += fmt::format("{}: <{}>", name,
                           alt_hex(static_cast<uint64_t>(int64_t{static_cast<int32_t>(op.a)})));
        break;
      case OP_bit_piece:
        out += fmt::format("{}: size: {} offset: {} ", name, op.a, op.b);
        break;
      case OP_implicit_value:
        out += name;
        append_block(out, bytes.subspan(next - op.a, op.a));
        break;
      case OP_GNU_push_tls_address:
        // 0xe0 is also DW_OP_HP_unknown; readelf names both.
        out += "DW_OP_GNU_push_tls_address or DW_OP_HP_unknown";
        break;
      case OP_entry_value:
      case OP_GNU_entry_value:
        out += fmt::format("{}: (", name);
        append_ops(out, bytes.subspan(next - op.a, op.a), address_size);
        out += ')';
        break;
      case OP_const_type:
      case OP_GNU_const_type:
        out += fmt::format("{}: <{}> ", name, alt_hex(op.a));
        append_block(out, bytes.subspan(next - op.b, op.b));
        break;
      case OP_regval_type:
      case OP_GNU_regval_type:
        out += fmt::format("{}: {} ({}) <{}>", name, op.a, reg_label(op.a), alt_hex(op.b));
        break;
      case OP_deref_type:
      case OP_GNU_deref_type:
        out += fmt::format("{}: {} <{}>", name, op.a, alt_hex(op.b));
        break;
      case OP_convert:
      case OP_GNU_convert:
      case OP_reinterpret:
      case OP_GNU_reinterpret:
      case OP_addrx:
      case OP_GNU_addr_index:
      case OP_GNU_const_index:
        out += fmt::format("{} <{}>", name, alt_hex(op.a));
        break;
      case OP_GNU_parameter_ref:
        out += fmt::format("{}: <{}>", name, alt_hex(op.a));
        break;
      // In frame info readelf cannot tell the size of a .debug_info offset and stops printing.
      case OP_call_ref:
      case OP_implicit_pointer:
      case OP_GNU_implicit_pointer:
      case OP_GNU_variable_value:
        out += fmt::format("({} in frame info)", name);
        return;
      // readelf 2.40 does not know these DWARF 5 ops and stops printing.
      case OP_constx:
      case OP_xderef_type:
        out += fmt::format("(Unknown location op {:#x})", code);
        return;
      default:
        out += name;
        break;
      }
    }
    if (next < bytes.size()) out += "; ";
  }
}

// Wrapping two's-complement helpers: the DWARF stack is modular, and signed overflow in C++ is UB.
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

std::string_view dw_op_name(uint8_t opcode) {
  return op_table().names[opcode];
}

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

std::string Expression::to_string() const {
  std::string out;
  append_ops(out, bytes_, address_size_);
  return out;
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
    const Form form = form_of(op.opcode);
    switch (form) {
    case Form::Branch:
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
    if (form_of(op.opcode) != Form::Branch) continue;
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
          return fmt::format("{}: register {} has no known value", name, reg_label(r));
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
                               reg_label(op.a));
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
