#include "report/expression_text.hpp"

#include <fmt/format.h>
#include <iterator>
#include <vector>

#include "model/dw_op.hpp"
#include "model/registers.hpp"
#include "report/readelf_bytes.hpp"

namespace ehelf {
namespace {

// readelf prints with "%#" PRIx64, which gives "0" rather than "0x0" for zero.
std::string alt_hex(uint64_t v) {
  return v == 0 ? std::string("0") : fmt::format("{:#x}", v);
}

// Opcodes readelf 2.40 names that ehelf's expression vocabulary does not decode (HP, PGI and an
// old GNU one); they take no operands in readelf, except DW_OP_GNU_encoded_addr.
std::string_view readelf_only_name(uint8_t op) {
  switch (op) {
  case 0xe1:
    return "DW_OP_HP_is_value";
  case 0xe2:
    return "DW_OP_HP_fltconst4";
  case 0xe3:
    return "DW_OP_HP_fltconst8";
  case 0xe4:
    return "DW_OP_HP_mod_range";
  case 0xe5:
    return "DW_OP_HP_unmod_range";
  case 0xe6:
    return "DW_OP_HP_tls";
  case 0xf8:
    return "DW_OP_PGI_omp_thread_num";
  default:
    return {};
  }
}
constexpr uint8_t kGnuEncodedAddr = 0xf1;

// decode_location_expression, over the whole of `bytes`. An entry value's nested expression is
// a level of its own (readelf recurses; a stack here, so no input can exhaust ours): ops that
// make readelf give up end only their level.
class Listing {
public:
  Listing(std::span<const uint8_t> bytes, unsigned address_size, uint64_t address)
      : b_(bytes), address_size_(address_size), address_(address) {}

  std::string run() {
    uint64_t pos = 0, end = b_.size();
    while (true) {
      if (pos >= end) {
        if (levels_.empty()) break;
        out_ += ')';
        pos = levels_.back().resume;
        end = levels_.back().end;
        levels_.pop_back();
      } else if (Step step = op(pos, end); step != Step::Next) {
        if (step == Step::Stop) pos = end; // readelf gives up on the rest of this level
        continue;
      }
      if (pos < end) out_ += "; ";
    }
    return std::move(out_);
  }

private:
  enum class Step { Next, Stop, Opened };

  // One op at `pos`. Stop: readelf decodes no more of this level. Opened: an entry value opened
  // a level, whose block `pos` and `end` now delimit.
  Step op(uint64_t& pos, uint64_t& end) {
    const uint8_t code = b_.at(pos++);
    const std::string_view name = dw_op_name(code);
    if (code >= OP_lit0 && code <= OP_lit31) {
      out_ += name;
      return Step::Next;
    }
    if (code >= OP_reg0 && code <= OP_reg31) {
      put("{} ({})", name, x86_64::register_label(code - OP_reg0));
      return Step::Next;
    }
    if (code >= OP_breg0 && code <= OP_breg31) {
      put("{} ({}): {}", name, x86_64::register_label(code - OP_breg0), b_.sleb(pos, end));
      return Step::Next;
    }
    switch (code) {
    case OP_addr:
      put("{}: {:x}", name, b_.get(pos, address_size_, end));
      break;
    case OP_const1u:
    case OP_pick:
    case OP_deref_size:
    case OP_xderef_size:
      put("{}: {}", name, b_.get(pos, 1, end));
      break;
    case OP_const2u:
      put("{}: {}", name, b_.get(pos, 2, end));
      break;
    case OP_const4u:
      put("{}: {}", name, b_.get(pos, 4, end));
      break;
    case OP_const8u:
      put("{}: {}", name, b_.get(pos, 8, end));
      break;
    case OP_const1s:
      put("{}: {}", name, b_.get_signed(pos, 1, end));
      break;
    case OP_const2s:
    case OP_skip:
    case OP_bra:
      put("{}: {}", name, b_.get_signed(pos, 2, end));
      break;
    case OP_const4s:
      put("{}: {}", name, b_.get_signed(pos, 4, end));
      break;
    case OP_const8s:
      put("{}: {}", name, b_.get_signed(pos, 8, end));
      break;
    case OP_constu:
    case OP_plus_uconst:
    case OP_piece:
      put("{}: {}", name, b_.uleb(pos, end));
      break;
    case OP_consts:
    case OP_fbreg:
      put("{}: {}", name, b_.sleb(pos, end));
      break;
    case OP_regx: {
      uint64_t reg = b_.uleb(pos, end);
      put("{}: {} ({})", name, reg, x86_64::register_label(reg));
      break;
    }
    case OP_bregx: {
      uint64_t reg = b_.uleb(pos, end);
      put("{}: {} ({}) {}", name, reg, x86_64::register_label(reg), b_.sleb(pos, end));
      break;
    }
    // readelf reads call2/call4 operands as signed and adds the (zero) CU offset.
    case OP_call2:
      put("{}: <{}>", name, alt_hex(static_cast<uint64_t>(b_.get_signed(pos, 2, end))));
      break;
    case OP_call4:
      put("{}: <{}>", name, alt_hex(static_cast<uint64_t>(b_.get_signed(pos, 4, end))));
      break;
    case OP_bit_piece: {
      uint64_t size = b_.uleb(pos, end);
      put("{}: size: {} offset: {} ", name, size, b_.uleb(pos, end));
      break;
    }
    case OP_implicit_value:
      out_ += name;
      block(pos, end, b_.uleb(pos, end));
      break;
    case OP_GNU_push_tls_address:
      // 0xe0 is also DW_OP_HP_unknown; readelf names both.
      out_ += "DW_OP_GNU_push_tls_address or DW_OP_HP_unknown";
      break;
    case OP_entry_value:
    case OP_GNU_entry_value: {
      uint64_t len = b_.uleb(pos, end);
      len = std::min(len, pos < end ? end - pos : 0);
      put("{}: (", name);
      levels_.push_back(Level{end, pos + len});
      end = pos + len;
      return Step::Opened;
    }
    case OP_const_type:
    case OP_GNU_const_type: {
      put("{}: <{}> ", name, alt_hex(b_.uleb(pos, end)));
      uint64_t len = b_.get(pos, 1, end);
      block(pos, end, len);
      break;
    }
    case OP_regval_type:
    case OP_GNU_regval_type: {
      uint64_t reg = b_.uleb(pos, end);
      put("{}: {} ({}) <{}>", name, reg, x86_64::register_label(reg), alt_hex(b_.uleb(pos, end)));
      break;
    }
    case OP_deref_type:
    case OP_GNU_deref_type: {
      uint64_t size = b_.get(pos, 1, end);
      put("{}: {} <{}>", name, size, alt_hex(b_.uleb(pos, end)));
      break;
    }
    case OP_convert:
    case OP_GNU_convert:
    case OP_reinterpret:
    case OP_GNU_reinterpret:
    case OP_addrx:
    case OP_GNU_addr_index:
    case OP_GNU_const_index:
      put("{} <{}>", name, alt_hex(b_.uleb(pos, end)));
      break;
    case OP_GNU_parameter_ref:
      put("{}: <{}>", name, alt_hex(b_.get(pos, 4, end)));
      break;
    case kGnuEncodedAddr:
      encoded_addr(pos, end);
      break;
    // In frame info readelf cannot tell the size of a .debug_info offset and stops printing.
    case OP_call_ref:
    case OP_implicit_pointer:
    case OP_GNU_implicit_pointer:
    case OP_GNU_variable_value:
      put("({} in frame info)", name);
      return Step::Stop;
    // readelf 2.40 does not know these DWARF 5 ops and stops printing.
    case OP_constx:
    case OP_xderef_type:
      put("(Unknown location op {:#x})", code);
      return Step::Stop;
    default:
      if (!name.empty())
        out_ += name;
      else if (auto other = readelf_only_name(code); !other.empty())
        out_ += other;
      else {
        put("({} location op {})", code >= 0xe0 ? "User defined" : "Unknown", alt_hex(code));
        return Step::Stop;
      }
    }
    return Step::Next;
  }

  template <class... Args> void put(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(out_), format, std::forward<Args>(args)...);
  }

  // display_block: " N byte block: " then the bytes that exist, each in hex and a space.
  void block(uint64_t& pos, uint64_t end, uint64_t len) {
    put(" {} byte block: ", len);
    len = std::min(len, end - pos);
    for (uint8_t byte : b_.span(pos, len))
      put("{:x} ", byte);
    pos += len;
  }

  // DW_OP_GNU_encoded_addr: an encoding byte, then a pointer read as get_encoded_value reads
  // FDE pointers (only the signed bit and pc-relative application count).
  void encoded_addr(uint64_t& pos, uint64_t end) {
    uint8_t encoding = static_cast<uint8_t>(b_.get(pos, 1, end));
    unsigned size = (encoding & 7) == 2   ? 2
                    : (encoding & 7) == 3 ? 4
                    : (encoding & 7) == 4 ? 8
                                          : address_size_;
    uint64_t v = 0;
    if (pos >= end || size > end - pos) {
      pos = end;
    } else {
      uint64_t field = pos;
      v = (encoding & 8) ? static_cast<uint64_t>(b_.get_signed(pos, size, end))
                         : b_.get(pos, size, end);
      if ((encoding & 0x70) == 0x10) v += address_ + field;
    }
    fmt::format_to(std::back_inserter(out_), "DW_OP_GNU_encoded_addr: fmt:{:02x} addr:{:0{}x}",
                   encoding, address_size_ < 8 ? v & ((uint64_t{1} << (8 * address_size_)) - 1) : v,
                   2 * address_size_);
  }

  struct Level {
    uint64_t end;    // the enclosing level's end
    uint64_t resume; // where it goes on after the nested block
  };
  ReadelfBytes b_;
  unsigned address_size_;
  uint64_t address_;
  std::vector<Level> levels_;
  std::string out_;
};

} // namespace

std::string expression_text(std::span<const uint8_t> bytes, unsigned address_size,
                            uint64_t address) {
  return Listing(bytes, address_size, address).run();
}

std::string expression_text(const Expression& e) {
  return expression_text(e.bytes(), e.address_size());
}

} // namespace ehelf
