#include "report/expression_text.hpp"

#include <fmt/format.h>

#include "model/dw_op.hpp"
#include "model/registers.hpp"

namespace ehelf {
namespace {

// readelf prints with "%#" PRIx64, which gives "0" rather than "0x0" for zero.
std::string alt_hex(uint64_t v) {
  return v == 0 ? std::string("0") : fmt::format("{:#x}", v);
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

// Appends the readelf text of a decoded expression. Where readelf gives up on the rest of an
// expression, this stops too, so the text stays identical.
void append_ops(std::string& out, const Expression& e) {
  const std::vector<ExprOp>& ops = e.ops();
  std::span<const uint8_t> bytes = e.bytes();
  for (size_t i = 0; i < ops.size(); ++i) {
    const ExprOp& op = ops[i];
    size_t next = i + 1 < ops.size() ? ops[i + 1].offset : bytes.size();
    std::string_view name = dw_op_name(op.opcode);
    uint8_t code = op.opcode;
    if (code >= OP_lit0 && code <= OP_lit31) {
      out += name;
    } else if (code >= OP_reg0 && code <= OP_reg31) {
      out += fmt::format("{} ({})", name, x86_64::register_label(code - OP_reg0));
    } else if (code >= OP_breg0 && code <= OP_breg31) {
      out += fmt::format("{} ({}): {}", name, x86_64::register_label(code - OP_breg0),
                         as_signed(op.a));
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
        out += fmt::format("{}: {} ({})", name, op.a, x86_64::register_label(op.a));
        break;
      case OP_bregx:
        out += fmt::format("{}: {} ({}) {}", name, op.a, x86_64::register_label(op.a),
                           as_signed(op.b));
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
        // Decoding the whole expression checked the nested one; decode it again to print it.
        if (auto nested = Expression::decode(bytes.subspan(next - op.a, op.a), e.address_size()))
          append_ops(out, *nested);
        out += ')';
        break;
      case OP_const_type:
      case OP_GNU_const_type:
        out += fmt::format("{}: <{}> ", name, alt_hex(op.a));
        append_block(out, bytes.subspan(next - op.b, op.b));
        break;
      case OP_regval_type:
      case OP_GNU_regval_type:
        out += fmt::format("{}: {} ({}) <{}>", name, op.a, x86_64::register_label(op.a),
                           alt_hex(op.b));
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

} // namespace

std::string expression_text(const Expression& e) {
  std::string out;
  append_ops(out, e);
  return out;
}

} // namespace ehelf
