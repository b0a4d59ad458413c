// (One file of 925 lines: readelf's display_debug_frames re-enacted as one walk, in readelf's own
// order, so that a line of our output that differs from readelf's leads to the step that wrote it.)
#include "report/readelf_frames.hpp"

#include <algorithm>
#include <deque>
#include <elf.h>
#include <fmt/format.h>
#include <functional>
#include <iterator>
#include <optional>
#include <span>
#include <unordered_map>

#include "dwarf/cfi_limits.hpp"
#include "dwarf/constants.hpp"
#include "model/registers.hpp"
#include "report/expression_text.hpp"
#include "report/readelf_bytes.hpp"

namespace ehelf {
namespace {

// readelf's x86_64 register table has 126 entries, and it refuses register numbers above that
// count (its check is `reg > count`, so 126 itself is accepted).
constexpr unsigned kReadelfRegisterCount = 126;

// readelf's column states: a DW_CFA opcode that set the rule, or "unreferenced".
enum class Col : uint8_t {
  Unreferenced,
  Undefined,
  SameValue,
  Offset,
  ValOffset,
  Register,
  Expression,
  ValExpression
};

// readelf's Frame_Chunk: a CIE's or FDE's state while its program runs.
struct Chunk {
  std::vector<Col> type;
  std::vector<int64_t> offset; // the offset of c/v cells, the register of register cells
  std::string_view augmentation;
  uint32_t code_factor = 0; // readelf keeps the factors, registers and ra in 32-bit ints
  int32_t data_factor = 0;
  uint64_t pc = 0;
  uint64_t pc_range = 0;
  uint32_t cfa_reg = 0;
  uint64_t cfa_offset = 0;
  uint32_t ra = 0;
  uint8_t fde_encoding = 0;
  bool cfa_exp = false;
  uint8_t ptr_size = 0;
  uint8_t segment_size = 0;
  std::optional<uint64_t> start; // section offset of a CIE; none for an FDE's blank state

  uint32_t ncols() const { return static_cast<uint32_t>(type.size()); }
  // frame_need_space: grows the columns to hold `reg`; -1 if it is outside readelf's table.
  int need_space(uint32_t reg) {
    if (reg < ncols()) return 0;
    if (reg > kReadelfRegisterCount) return -1;
    type.resize(reg + 1, Col::Unreferenced);
    offset.resize(reg + 1, 0);
    return 1;
  }
};

// readelf's state remembered by DW_CFA_remember_state; `count` identical pushes in a row.
struct Saved {
  std::vector<Col> type;
  std::vector<int64_t> offset;
  uint32_t cfa_reg;
  uint64_t cfa_offset;
  bool cfa_exp;
  uint32_t ra;
  uint64_t count = 1;

  bool same_state(const Saved& o) const {
    return type == o.type && offset == o.offset && cfa_reg == o.cfa_reg &&
           cfa_offset == o.cfa_offset && cfa_exp == o.cfa_exp && ra == o.ra;
  }
};

// The CIEs and remembered states a section may make us keep. readelf keeps them all (a hostile
// section of CIEs or remember_state ops costs it ~100 times its size); past this we stop the
// section instead, with a warning. Real sections keep well under 1 MiB.
constexpr uint64_t kMaxStateBytes = uint64_t{256} << 20;

// What a kept state costs, roughly.
uint64_t state_bytes(size_t ncols) {
  return sizeof(Chunk) + ncols * (sizeof(Col) + sizeof(int64_t));
}

// readelf's regname(reg, 0): "rN (name)", or "rN" for unnamed registers, N printed as an int.
std::string reg_full(uint32_t r) {
  auto n = x86_64::register_name(r);
  if (n.empty()) return fmt::format("r{}", static_cast<int32_t>(r));
  return fmt::format("r{} ({})", static_cast<int32_t>(r), n);
}

// One frame section, walked as readelf's display_debug_frames walks it.
class FrameWalker {
public:
  FrameWalker(std::span<const uint8_t> data, uint64_t address, std::string_view name,
              unsigned& addr_size, std::string& out, ReadelfWarnings& warnings, uint64_t& file_rows,
              std::string_view file = {})
      : bytes_(data), address_(address), name_(name), is_eh_(name == ".eh_frame"),
        addr_size_(addr_size), out_(out), warnings_(warnings), file_rows_(file_rows), file_(file) {}

  // Walks every entry; `flush` is called between entries and every few thousand rows (to write
  // out what accumulated). `origin` is " (loaded from FILE)" once readelf has found a separate
  // debug file, else empty.
  void run(std::string_view origin, const std::function<void()>& flush) {
    flush_ = &flush;
    fmt::format_to(std::back_inserter(out_), "Contents of the {} section{}:\n\n", name_, origin);
    const uint64_t end = bytes_.size();
    const unsigned saved_addr_size = addr_size_;
    uint64_t pos = 0;
    while (pos < end) {
      flush();
      if (!entry(pos, saved_addr_size)) break;
      addr_size_ = saved_addr_size;
    }
    out_ += '\n';
  }

private:
  void warn(uint64_t offset, std::string message) {
    if (warnings_.kept.size() >= ReadelfWarnings::kKept) {
      ++warnings_.count; // not even formatted
      return;
    }
    warnings_.add(
        Error::at(std::string(name_), offset, std::move(message)).in_file(std::string(file_)));
  }

  // READ_ULEB / READ_SLEB into a variable of `bits` bits (readelf truncates and complains).
  uint64_t uleb(uint64_t& pos, uint64_t limit, unsigned bits = 64) {
    return leb(pos, limit, false, bits);
  }
  int64_t sleb(uint64_t& pos, uint64_t limit, unsigned bits = 64) {
    return static_cast<int64_t>(leb(pos, limit, true, bits));
  }
  uint64_t leb(uint64_t& pos, uint64_t limit, bool sign, unsigned bits) {
    uint64_t at = pos;
    int status = 0;
    uint64_t v = bytes_.leb(pos, limit, sign, status);
    if (bits < 64) {
      uint64_t kept = v & ((uint64_t{1} << bits) - 1);
      if (sign && (kept >> (bits - 1))) kept |= ~uint64_t{0} << bits;
      if (kept != v) status |= 2;
      v = kept;
    }
    if (status & 1)
      warn(at, "end of data encountered whilst reading LEB");
    else if (status & 2)
      warn(at, "read LEB value is too large to store in destination variable");
    return v;
  }
  // readelf's SKIP_ULEB/SKIP_SLEB: the same walk, no complaint.
  void skip_leb(uint64_t& pos, uint64_t limit) { bytes_.uleb(pos, limit); }

  // size_of_encoded_value: 2, 4 or 8 by the low three bits, else the current address size.
  unsigned encoded_size(uint8_t encoding) const {
    switch (encoding & 7) {
    case 2:
      return 2;
    case 3:
      return 4;
    case 4:
      return 8;
    default:
      return addr_size_;
    }
  }

  // get_encoded_value: only the signed bit and pc-relative application are honoured; a value
  // that does not fit before `limit` is 0 and moves the position to the limit.
  uint64_t encoded(uint64_t& pos, uint8_t encoding, uint64_t limit) {
    unsigned size = encoded_size(encoding);
    if (pos >= limit || size > limit - pos) {
      warn(pos, "Encoded value extends past end of section");
      pos = limit;
      return 0;
    }
    uint64_t field = pos;
    uint64_t v = (encoding & dw::EH_PE_signed)
                     ? static_cast<uint64_t>(bytes_.get_signed(pos, size, limit))
                     : bytes_.get(pos, size, limit);
    if ((encoding & 0x70) == dw::EH_PE_pcrel) v += address_ + field;
    return v;
  }

  // read_cie: the CIE's header from `pos` (after the id) to `end`; none when readelf fails it.
  std::optional<Chunk> read_cie(uint64_t& pos, uint64_t end) {
    if (pos >= end) return std::nullopt;
    Chunk fc;
    const uint8_t version = bytes_.at(pos++);
    uint64_t aug_start = pos;
    while (pos < end)
      if (bytes_.at(pos++) == 0) break;
    // readelf also refuses a terminator that is the entry's last byte.
    if (pos == end) {
      warn(aug_start, "No terminator for augmentation name");
      return std::nullopt;
    }
    auto aug = bytes_.span(aug_start, pos - 1 - aug_start);
    fc.augmentation = std::string_view(reinterpret_cast<const char*>(aug.data()), aug.size());
    if (fc.augmentation == "eh") {
      if (addr_size_ > end - pos) return std::nullopt;
      pos += addr_size_;
    }
    if (version >= 4) {
      if (end - pos < 2) return std::nullopt;
      fc.ptr_size = static_cast<uint8_t>(bytes_.get(pos, 1, end));
      if (fc.ptr_size < 1 || fc.ptr_size > 8) {
        warn(pos - 1, fmt::format("Invalid pointer size ({}) in CIE data", fc.ptr_size));
        return std::nullopt;
      }
      fc.segment_size = static_cast<uint8_t>(bytes_.get(pos, 1, end));
      if (fc.segment_size > 8 || fc.segment_size + fc.ptr_size > 8) {
        warn(pos - 1, fmt::format("Invalid segment size ({}) in CIE data", fc.segment_size));
        return std::nullopt;
      }
      addr_size_ = fc.ptr_size;
    } else {
      fc.ptr_size = static_cast<uint8_t>(addr_size_);
    }
    fc.code_factor = static_cast<uint32_t>(uleb(pos, end, 32));
    fc.data_factor = static_cast<int32_t>(sleb(pos, end, 32));
    if (pos >= end) return std::nullopt;
    fc.ra = version == 1 ? static_cast<uint32_t>(bytes_.get(pos, 1, end))
                         : static_cast<uint32_t>(uleb(pos, end, 32));
    uint64_t aug_data = 0, aug_len = 0;
    if (fc.augmentation.starts_with('z')) {
      if (pos >= end) return std::nullopt;
      aug_len = uleb(pos, end);
      aug_data = pos;
      if (aug_len > end - pos) {
        warn(aug_data, fmt::format("Augmentation data too long: {:#x}, expected at most {:#x}",
                                   aug_len, end - pos));
        return std::nullopt;
      }
      pos += aug_len;
    }
    // The letters are walked in step with the data; the first unknown one stops the walk, so a
    // later 'R' is never read.
    uint64_t q = aug_data, q_end = aug_data + aug_len;
    for (size_t i = 1; aug_len && i < fc.augmentation.size() && q < q_end; ++i) {
      char letter = fc.augmentation[i];
      if (letter == 'L')
        ++q;
      else if (letter == 'P')
        q += 1 + encoded_size(bytes_.at(q));
      else if (letter == 'R')
        fc.fde_encoding = bytes_.at(q++);
      else if (letter != 'S' && letter != 'B')
        break;
    }
    return fc;
  }

  // One entry at `pos`; false when readelf stops walking the section.
  bool entry(uint64_t& pos, unsigned saved_addr_size) {
    const uint64_t end = bytes_.size();
    const uint64_t saved = pos;
    entry_offset_ = saved;
    uint64_t length = bytes_.get(pos, 4, end);
    if (length == 0) {
      fmt::format_to(std::back_inserter(out_), "\n{:08x} ZERO terminator\n\n", saved);
      while (pos < end && bytes_.at(pos) == 0)
        ++pos;
      return true;
    }
    unsigned offset_size = 4;
    if (length == 0xffffffff) {
      length = bytes_.get(pos, 8, end);
      offset_size = 8;
    }
    uint64_t block_end = end;
    if (length > end - pos)
      warn(saved, fmt::format("Invalid length {:#x} in FDE at {:#x}", length, saved));
    else
      block_end = pos + length;
    const uint64_t id = bytes_.get(pos, offset_size, block_end);
    unsigned encoded_ptr_size = saved_addr_size;
    const bool is_cie =
        is_eh_ ? id == 0
               : (offset_size == 4 && id == 0xffffffff) || (offset_size == 8 && id == ~uint64_t{0});
    Chunk* fc = nullptr;
    const Chunk* cie = nullptr;
    Chunk fde;
    if (is_cie) {
      auto c = read_cie(pos, block_end);
      if (!c) return false;
      c->start = saved;
      if (c->need_space(std::max(max_regs_ ? max_regs_ - 1 : 0, c->ra)) < 0) return false;
      if (c->fde_encoding) encoded_ptr_size = encoded_size(c->fde_encoding);
      fmt::format_to(std::back_inserter(out_), "\n{:08x} ", saved);
      hex(length, c->ptr_size);
      hex(id, offset_size);
      fmt::format_to(std::back_inserter(out_), "CIE \"{}\" cf={} df={} ra={}\n", c->augmentation,
                     static_cast<int32_t>(c->code_factor), c->data_factor,
                     static_cast<int32_t>(c->ra));
      if (!keep(c->ncols(), saved)) return false;
      chunks_.push_back(std::move(*c));
      fc = &chunks_.back();
      cie_at_[saved] = fc;
      cie = fc;
    } else {
      bool stop = false;
      cie = find_cie(saved, pos, id, offset_size, length, encoded_ptr_size, stop);
      if (stop) return false;
      fc = &fde;
      if (!cie) {
        fde.need_space(max_regs_ ? max_regs_ - 1 : 0);
        fde.ptr_size = static_cast<uint8_t>(addr_size_);
        cie = fc;
      } else {
        fde.type = cie->type;
        fde.offset = cie->offset;
        fde.augmentation = cie->augmentation;
        fde.ptr_size = cie->ptr_size;
        addr_size_ = cie->ptr_size;
        fde.segment_size = cie->segment_size;
        fde.code_factor = cie->code_factor;
        fde.data_factor = cie->data_factor;
        fde.cfa_reg = cie->cfa_reg;
        fde.cfa_offset = cie->cfa_offset;
        fde.ra = cie->ra;
        fde.need_space(max_regs_ ? max_regs_ - 1 : 0);
        fde.fde_encoding = cie->fde_encoding;
      }
      if (fde.fde_encoding) encoded_ptr_size = encoded_size(fde.fde_encoding);
      uint64_t selector = 0;
      if (fde.segment_size) selector = bytes_.get(pos, fde.segment_size, block_end);
      fde.pc = encoded(pos, fde.fde_encoding, block_end);
      // The range is read unsigned, at the encoding's size, never pc-relative.
      fde.pc_range = bytes_.get(pos, encoded_ptr_size, block_end);
      if (cie->augmentation.starts_with('z')) {
        uint64_t aug_len = uleb(pos, block_end);
        uint64_t room = block_end - pos;
        if (aug_len > room) {
          warn(pos, fmt::format("Augmentation data too long: {:#x}, expected at most {:#x}",
                                aug_len, room));
          pos = block_end;
          aug_len = 0;
        }
        pos += aug_len;
      }
      fmt::format_to(std::back_inserter(out_), "\n{:08x} ", saved);
      hex(length, fde.ptr_size);
      hex(id, offset_size);
      out_ += "FDE ";
      if (cie->start) {
        fmt::format_to(std::back_inserter(out_), "cie={:08x}", *cie->start);
      } else {
        // readelf says nothing more on stderr; we name the problem.
        out_ += "cie=invalid ";
        warn(saved, fmt::format("CIE pointer {:#x} leads to no CIE (cie=invalid)", id));
      }
      out_ += " pc=";
      if (fde.segment_size) fmt::format_to(std::back_inserter(out_), "{:04x}:", selector);
      hex_ns(fde.pc, fde.ptr_size);
      out_ += "..";
      hex_ns(fde.pc + fde.pc_range, fde.ptr_size);
      out_ += '\n';
    }
    interpret(*fc, *cie, pos, block_end, encoded_ptr_size);
    pos = block_end;
    return !stopped_;
  }

  // Accounts for a state to keep; false (and the section stops) past kMaxStateBytes.
  bool keep(size_t ncols, uint64_t offset) {
    kept_bytes_ += state_bytes(ncols);
    if (kept_bytes_ <= kMaxStateBytes) return true;
    warn(offset, fmt::format("more than {} MiB of CIEs and remembered states: ehelf stops this "
                             "section here (readelf would go on)",
                             kMaxStateBytes >> 20));
    stopped_ = true;
    return false;
  }

  // The CIE an FDE refers to: one already walked, or one further on (read, never run); null
  // for none. `length` becomes the forward CIE's length, as readelf reuses the variable.
  const Chunk* find_cie(uint64_t saved, uint64_t pos, uint64_t id, unsigned offset_size,
                        uint64_t& length, unsigned& encoded_ptr_size, bool& stop) {
    const uint64_t end = bytes_.size();
    uint64_t cie_off = id;
    if (is_eh_) {
      uint64_t sign = uint64_t{1} << (offset_size * 8 - 1);
      cie_off = (cie_off ^ sign) - sign;
      cie_off = (pos - 4) - cie_off; // 4 even in 64-bit DWARF, as readelf computes it
    }
    if (cie_off <= saved) {
      auto it = cie_at_.find(cie_off);
      return it == cie_at_.end() ? nullptr : it->second;
    }
    if (cie_off >= end) return nullptr;
    if (auto it = forward_at_.find(cie_off); it != forward_at_.end()) return it->second;
    uint64_t scan = cie_off;
    unsigned off_size = 4;
    length = bytes_.get(scan, 4, end);
    if (length == 0xffffffff) {
      length = bytes_.get(scan, 8, end);
      off_size = 8;
    }
    if (length == 0 || length > end - scan) return nullptr;
    uint64_t cie_end = scan + length;
    uint64_t c_id = bytes_.get(scan, off_size, cie_end);
    bool is_cie =
        is_eh_ ? c_id == 0
               : (off_size == 4 && c_id == 0xffffffff) || (off_size == 8 && c_id == ~uint64_t{0});
    if (!is_cie) return nullptr;
    auto c = read_cie(scan, cie_end);
    if (!c) {
      warn(cie_off, "Failed to read CIE information");
      stop = true;
      return nullptr;
    }
    c->start = cie_off;
    if (c->need_space(std::max(max_regs_ ? max_regs_ - 1 : 0, c->ra)) < 0) {
      warn(cie_off, "Invalid max register");
      stop = true;
      return nullptr;
    }
    if (c->fde_encoding) encoded_ptr_size = encoded_size(c->fde_encoding);
    if (!keep(c->ncols(), cie_off)) {
      stop = true;
      return nullptr;
    }
    forward_refs_.push_back(std::move(*c));
    forward_at_[cie_off] = &forward_refs_.back();
    return &forward_refs_.back();
  }

  // The operand size of DW_CFA_advance_loc1/2/4 and DW_CFA_MIPS_advance_loc8.
  static unsigned advance_size(uint8_t op) {
    return op == dw::CFA_advance_loc1   ? 1
           : op == dw::CFA_advance_loc2 ? 2
           : op == dw::CFA_advance_loc4 ? 4
                                        : 8;
  }

  // Pass 1: every register the program names becomes a column (u until defined). It skips
  // operands more leniently than pass 2 reads them, and steps over unknown opcodes.
  void size_columns(Chunk& fc, const Chunk& cie, uint64_t pos, uint64_t end,
                    unsigned encoded_ptr_size) {
    auto skip = [&](uint64_t n) { pos = end - pos < n ? end : pos + n; };
    while (pos < end) {
      uint8_t op = bytes_.at(pos++);
      uint64_t reg = ~uint64_t{0};
      if (op & 0xc0) {
        if ((op & 0xc0) == dw::CFA_offset) skip_leb(pos, end);
        if ((op & 0xc0) != dw::CFA_advance_loc) reg = op & 0x3f;
        op &= 0xc0;
      } else {
        switch (op) {
        case dw::CFA_set_loc:
          skip(encoded_ptr_size);
          break;
        case dw::CFA_advance_loc1:
        case dw::CFA_advance_loc2:
        case dw::CFA_advance_loc4:
        case dw::CFA_MIPS_advance_loc8:
          skip(advance_size(op));
          break;
        case dw::CFA_offset_extended:
        case dw::CFA_val_offset:
        case dw::CFA_register:
        case dw::CFA_GNU_negative_offset_extended:
        case dw::CFA_offset_extended_sf:
        case dw::CFA_val_offset_sf:
          reg = uleb(pos, end, 32);
          skip_leb(pos, end);
          break;
        case dw::CFA_restore_extended:
        case dw::CFA_undefined:
        case dw::CFA_same_value:
          reg = uleb(pos, end, 32);
          break;
        case dw::CFA_def_cfa:
        case dw::CFA_def_cfa_sf:
          skip_leb(pos, end);
          skip_leb(pos, end);
          break;
        case dw::CFA_def_cfa_register:
        case dw::CFA_def_cfa_offset:
        case dw::CFA_def_cfa_offset_sf:
        case dw::CFA_GNU_args_size:
          skip_leb(pos, end);
          break;
        case dw::CFA_def_cfa_expression:
          skip(uleb(pos, end));
          break;
        case dw::CFA_expression:
        case dw::CFA_val_expression:
          reg = uleb(pos, end, 32);
          skip(uleb(pos, end));
          break;
        default:
          break;
        }
      }
      // readelf's "no register" marker is -1 as an unsigned int, so register 0xffffffff is
      // never a column (and is no bad register in this pass either).
      if (reg > 0xfffffffe || fc.need_space(static_cast<uint32_t>(reg)) < 0) continue;
      fc.type[reg] =
          reg >= cie.ncols() || cie.type[reg] == Col::Unreferenced ? Col::Undefined : cie.type[reg];
    }
  }

  // Runs one CIE or FDE program: pass 1 sizes the columns, pass 2 prints a row before every
  // location change and once at the end (unless the program is all nops).
  void interpret(Chunk& fc, const Chunk& cie, uint64_t pos, uint64_t end,
                 unsigned encoded_ptr_size) {
    need_header_ = true;
    entry_rows_ = 0;
    rows_cut_ = false;
    size_columns(fc, cie, pos, end, encoded_ptr_size);
    bool all_nops = true;
    const uint64_t df = static_cast<uint64_t>(int64_t{fc.data_factor});
    while (pos < end && !rows_cut_) {
      const uint64_t at = pos;
      uint8_t op = bytes_.at(pos++);
      const uint8_t opa = op & 0x3f;
      if (op & 0xc0) op &= 0xc0;
      if (op != dw::CFA_nop) all_nops = false;
      // A "bad register" (outside the columns, so above 126) is printed, not applied.
      auto bad = [&](uint32_t reg) { return reg >= fc.ncols(); };
      auto set = [&](uint32_t reg, Col t, int64_t off) {
        fc.type[reg] = t;
        fc.offset[reg] = off;
      };
      auto bad_line = [&](std::string_view what, uint32_t reg, std::string_view rest) {
        fmt::format_to(std::back_inserter(out_), "  {}: bad register: {}{}\n", what, reg_full(reg),
                       rest);
      };
      auto at_cfa = [](std::string_view verb, uint64_t v) {
        return fmt::format(" {} cfa{:+}", verb, static_cast<int64_t>(v));
      };
      switch (op) {
      case dw::CFA_advance_loc:
        display_row(fc);
        fc.pc += static_cast<uint32_t>(opa * fc.code_factor); // a 32-bit product in readelf
        break;
      case dw::CFA_offset: {
        uint64_t ofs = uleb(pos, end) * df;
        if (bad(opa))
          bad_line("DW_CFA_offset", opa, at_cfa("at", ofs));
        else
          set(opa, Col::Offset, static_cast<int64_t>(ofs));
        break;
      }
      case dw::CFA_restore:
      case dw::CFA_restore_extended: {
        uint32_t reg = op == dw::CFA_restore ? opa : static_cast<uint32_t>(uleb(pos, end, 32));
        if (bad(reg)) {
          bad_line(op == dw::CFA_restore ? "DW_CFA_restore" : "DW_CFA_restore_extended", reg, "");
          break;
        }
        if (reg >= cie.ncols() || cie.type[reg] == Col::Unreferenced)
          set(reg, Col::Undefined, 0);
        else
          set(reg, cie.type[reg], cie.offset[reg]);
        break;
      }
      case dw::CFA_set_loc: {
        uint64_t v = encoded(pos, fc.fde_encoding, end);
        display_row(fc);
        fc.pc = v;
        break;
      }
      case dw::CFA_advance_loc1:
      case dw::CFA_advance_loc2:
      case dw::CFA_advance_loc4:
      case dw::CFA_MIPS_advance_loc8: {
        uint64_t delta = bytes_.get(pos, advance_size(op), end) * fc.code_factor;
        display_row(fc);
        fc.pc += delta;
        break;
      }
      case dw::CFA_offset_extended:
      case dw::CFA_val_offset:
      case dw::CFA_offset_extended_sf:
      case dw::CFA_val_offset_sf:
      case dw::CFA_GNU_negative_offset_extended: {
        uint32_t reg = static_cast<uint32_t>(uleb(pos, end, 32));
        bool sf = op == dw::CFA_offset_extended_sf || op == dw::CFA_val_offset_sf ||
                  op == dw::CFA_GNU_negative_offset_extended;
        uint64_t n = sf ? static_cast<uint64_t>(sleb(pos, end)) : uleb(pos, end);
        uint64_t ofs = op == dw::CFA_GNU_negative_offset_extended ? (0 - n) * df : n * df;
        bool val = op == dw::CFA_val_offset || op == dw::CFA_val_offset_sf;
        if (bad(reg))
          bad_line(dw::cfa_name(op), reg, at_cfa(val ? "is" : "at", ofs));
        else
          set(reg, val ? Col::ValOffset : Col::Offset, static_cast<int64_t>(ofs));
        break;
      }
      case dw::CFA_undefined:
      case dw::CFA_same_value: {
        uint32_t reg = static_cast<uint32_t>(uleb(pos, end, 32));
        if (bad(reg))
          bad_line(dw::cfa_name(op), reg, "");
        else
          set(reg, op == dw::CFA_undefined ? Col::Undefined : Col::SameValue, 0);
        break;
      }
      case dw::CFA_register: {
        uint32_t reg = static_cast<uint32_t>(uleb(pos, end, 32));
        uint64_t reg2 = uleb(pos, end);
        if (bad(reg))
          bad_line("DW_CFA_register", reg, " in " + reg_full(static_cast<uint32_t>(reg2)));
        else
          set(reg, Col::Register, static_cast<int64_t>(reg2));
        break;
      }
      case dw::CFA_remember_state: {
        Saved now{fc.type, fc.offset, fc.cfa_reg, fc.cfa_offset, fc.cfa_exp, fc.ra};
        if (!remembered_.empty() && remembered_.back().same_state(now)) {
          ++remembered_.back().count;
        } else {
          if (!keep(fc.ncols(), at)) return;
          remembered_.push_back(std::move(now));
        }
        break;
      }
      case dw::CFA_restore_state: {
        if (remembered_.empty()) {
          out_ += "Mismatched DW_CFA_restore_state\n";
          break;
        }
        Saved s = remembered_.back();
        if (--remembered_.back().count == 0) remembered_.pop_back();
        fc.cfa_offset = s.cfa_offset;
        fc.cfa_reg = s.cfa_reg;
        fc.ra = s.ra;
        fc.cfa_exp = s.cfa_exp;
        // Only the remembered columns come back (the state may come from another FDE with more
        // columns: grow first). A state of no columns makes readelf drop them all.
        if (s.type.empty() || fc.need_space(static_cast<uint32_t>(s.type.size() - 1)) < 0) {
          warn(at, "Invalid column number in saved frame state");
          fc.type.clear();
          fc.offset.clear();
        } else {
          std::copy(s.type.begin(), s.type.end(), fc.type.begin());
          std::copy(s.offset.begin(), s.offset.end(), fc.offset.begin());
        }
        break;
      }
      case dw::CFA_def_cfa:
      case dw::CFA_def_cfa_sf:
        fc.cfa_reg = static_cast<uint32_t>(uleb(pos, end, 32));
        fc.cfa_offset =
            op == dw::CFA_def_cfa ? uleb(pos, end) : static_cast<uint64_t>(sleb(pos, end)) * df;
        fc.cfa_exp = false;
        break;
      case dw::CFA_def_cfa_register:
        fc.cfa_reg = static_cast<uint32_t>(uleb(pos, end, 32));
        fc.cfa_exp = false;
        break;
      case dw::CFA_def_cfa_offset:
        fc.cfa_offset = uleb(pos, end);
        break;
      case dw::CFA_def_cfa_offset_sf:
        fc.cfa_offset = static_cast<uint64_t>(sleb(pos, end)) * df;
        break;
      case dw::CFA_nop:
      case dw::CFA_GNU_window_save:
        break;
      case dw::CFA_GNU_args_size:
        uleb(pos, end);
        break;
      case dw::CFA_def_cfa_expression:
      case dw::CFA_expression:
      case dw::CFA_val_expression: {
        uint32_t reg =
            op == dw::CFA_def_cfa_expression ? 0 : static_cast<uint32_t>(uleb(pos, end, 32));
        uint64_t len = uleb(pos, end);
        // A block longer than the rest is reported, not skipped: its bytes run as opcodes.
        if (len > end - pos) {
          fmt::format_to(std::back_inserter(out_), "  {}: <corrupt len {}>\n", dw::cfa_name(op),
                         len);
          break;
        }
        if (op == dw::CFA_def_cfa_expression)
          fc.cfa_exp = true;
        else if (bad(reg))
          bad_line(dw::cfa_name(op), reg,
                   " (" + expression_text(bytes_.span(pos, len), addr_size_, address_ + pos) + ")");
        else
          fc.type[reg] = op == dw::CFA_expression ? Col::Expression : Col::ValExpression;
        pos += len;
        break;
      }
      default:
        if (op >= 0x1c && op <= 0x3f)
          fmt::format_to(std::back_inserter(out_),
                         "  DW_CFA_??? (User defined call frame op: {:#x})\n", op);
        else
          warn(at, fmt::format("Unsupported or unknown Dwarf Call Frame Instruction number: {:#x}",
                               op));
        pos = end;
      }
    }
    if (!all_nops) display_row(fc);
  }

  // Counts a row to print; false past the limits on a table's rows (cfi_limits.hpp), where the
  // rest of the entry (or of the section) is left out with a warning. readelf prints them all,
  // but a compressed section of 20 KB can hold a hundred million rows: printing them would take
  // hours and gigabytes for rows no table would accept; the same limits as the table readers
  // keep the output to what a real file (well under them) prints, identical to readelf's.
  bool row_allowed() {
    if (rows_cut_) return false;
    if (++file_rows_ > cfi_limits::kMaxRowsPerModule) {
      warn(entry_offset_, fmt::format("more than {} rows in the file's frame sections: ehelf "
                                      "stops this section here (readelf would go on)",
                                      cfi_limits::kMaxRowsPerModule));
      rows_cut_ = stopped_ = true;
      return false;
    }
    if (++entry_rows_ > cfi_limits::kMaxRowsPerFde) {
      warn(entry_offset_, fmt::format("more than {} rows in one entry: ehelf prints no more of "
                                      "it (readelf would go on)",
                                      cfi_limits::kMaxRowsPerFde));
      rows_cut_ = true;
      return false;
    }
    if (entry_rows_ % 4096 == 0 && flush_) (*flush_)();
    return true;
  }

  // frame_display_row: the header once per chunk, then the row.
  void display_row(const Chunk& fc) {
    if (!row_allowed()) return;
    max_regs_ = fc.ncols();
    if (need_header_) {
      need_header_ = false;
      size_t start = out_.size();
      out_ += "   LOC";
      pad_to(start, 2 * addr_size_);
      out_ += " CFA      ";
      for (uint32_t r = 0; r < fc.ncols(); ++r)
        if (fc.type[r] != Col::Unreferenced) {
          if (r == fc.ra)
            out_ += "ra    ";
          else
            padded(x86_64::register_label(r), 5);
        }
      out_ += '\n';
    }
    hex(fc.pc, addr_size_);
    if (fc.cfa_exp)
      out_ += "exp      ";
    else {
      size_t start = out_.size();
      auto name = x86_64::register_name(fc.cfa_reg);
      if (name.empty())
        fmt::format_to(std::back_inserter(out_), "r{}", static_cast<int32_t>(fc.cfa_reg));
      else
        out_ += name;
      signed_dec(static_cast<int32_t>(fc.cfa_offset)); // readelf prints it as an int
      pad_to(start, 8);
      out_ += ' ';
    }
    for (uint32_t r = 0; r < fc.ncols(); ++r) {
      switch (fc.type[r]) {
      case Col::Unreferenced:
        continue;
      case Col::Undefined:
        out_ += "u     ";
        break;
      case Col::SameValue:
        out_ += "s     ";
        break;
      case Col::Offset:
      case Col::ValOffset: {
        size_t start = out_.size();
        out_ += fc.type[r] == Col::Offset ? 'c' : 'v';
        signed_dec(fc.offset[r]);
        pad_to(start, 5);
        out_ += ' ';
        break;
      }
      case Col::Register:
        padded(reg_full(static_cast<uint32_t>(fc.offset[r])), 5);
        break;
      case Col::Expression:
        out_ += "exp   ";
        break;
      case Col::ValExpression:
        out_ += "vexp  ";
        break;
      }
    }
    out_ += '\n';
  }

  // Hand-rolled formatting for the per-row cells: this loop prints millions of them, and
  // fmt's width handling (Unicode-aware) dominated the profile.
  // print_hex: 2n hex digits of the low n bytes, then a space; hex_ns without the space.
  void hex_ns(uint64_t v, unsigned n) {
    if (n == 0) n = 2;
    char buf[16];
    for (unsigned i = 2 * n; i-- > 0; v >>= 4)
      buf[i] = "0123456789abcdef"[v & 15];
    out_.append(buf, 2 * n);
  }
  void hex(uint64_t v, unsigned n) {
    hex_ns(v, n);
    out_ += ' ';
  }
  void signed_dec(int64_t v) { // printf's "%+d" / "%+lld"
    char buf[24];
    int n = 0;
    uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    do {
      buf[n++] = static_cast<char>('0' + mag % 10);
      mag /= 10;
    } while (mag);
    out_ += v < 0 ? '-' : '+';
    while (n)
      out_ += buf[--n];
  }
  // Pads what was appended since `start` to `width` ("%-*s").
  void pad_to(size_t start, size_t width) {
    size_t len = out_.size() - start;
    if (len < width) out_.append(width - len, ' ');
  }
  void padded(std::string_view text, size_t width) {
    size_t start = out_.size();
    out_ += text;
    pad_to(start, width);
    out_ += ' ';
  }

  ReadelfBytes bytes_;
  uint64_t address_;
  std::string_view name_;
  bool is_eh_;
  unsigned& addr_size_; // readelf's eh_addr_size: a v4 CIE changes it for its entry
  std::string& out_;
  ReadelfWarnings& warnings_;
  uint64_t& file_rows_;   // rows printed for the file so far (all its frame sections)
  std::string_view file_; // for the warnings
  const std::function<void()>* flush_ = nullptr;
  uint64_t entry_offset_ = 0;      // of the entry being printed
  uint64_t entry_rows_ = 0;        // rows printed for it
  bool rows_cut_ = false;          // the limits were reached: the entry prints no more
  std::deque<Chunk> chunks_;       // CIEs met in the walk (stable addresses)
  std::deque<Chunk> forward_refs_; // CIEs read ahead for an FDE, never run
  std::unordered_map<uint64_t, const Chunk*> cie_at_;     // chunks_ by section offset
  std::unordered_map<uint64_t, const Chunk*> forward_at_; // forward_refs_ by section offset
  uint64_t kept_bytes_ = 0;
  bool stopped_ = false; // kMaxStateBytes or the rows of the file reached
  // readelf keeps one remember_state stack for the whole section: a restore_state in one FDE
  // can pop what an earlier FDE pushed.
  std::vector<Saved> remembered_;
  uint32_t max_regs_ = 0; // the column count of the last row printed, which later chunks get
  bool need_header_ = true;
};

} // namespace

ReadelfWarnings render_readelf_frame_section(std::span<const uint8_t> data, uint64_t address,
                                             std::string_view name, std::string& out) {
  ReadelfWarnings warnings;
  unsigned addr_size = 8;
  uint64_t rows = 0;
  FrameWalker(data, address, name, addr_size, out, warnings, rows).run("", [] {});
  return warnings;
}

ReadelfDumpOutcome render_readelf_frames(const ElfFile& file, const ElfFile* separate,
                                         const std::string& display_name, std::string& out,
                                         std::FILE* sink) {
  ReadelfDumpOutcome outcome;
  uint64_t rows = 0;
  const std::function<void()> flush = [&] {
    if (sink && out.size() > (1u << 16)) {
      std::fwrite(out.data(), 1, out.size(), sink);
      out.clear();
    }
  };
  // readelf names the file a section came from only once it has found a separate debug file.
  auto render_file = [&](const ElfFile& elf, const std::string& name) {
    unsigned addr_size = 8; // readelf's eh_addr_size, set per file
    for (const Section& sec : elf.sections()) {
      std::string_view n = sec.name;
      std::string_view rest = n.starts_with(".debug_")    ? n.substr(7)
                              : n.starts_with(".zdebug_") ? n.substr(8)
                                                          : std::string_view();
      if (n != ".eh_frame" && !rest.starts_with("frame")) continue;
      ++outcome.frame_sections;
      if (sec.size == 0) {
        fmt::format_to(std::back_inserter(out), "\nSection '{}' has no debugging data.\n", n);
        continue;
      }
      if (sec.type == SHT_NOBITS) {
        fmt::format_to(std::back_inserter(out),
                       "section '{}' has the NOBITS type - its contents are unreliable.\n", n);
        outcome.failed = true;
        continue;
      }
      if (n != ".eh_frame" && n != ".debug_frame" && n != ".zdebug_frame") {
        fmt::format_to(std::back_inserter(out), "Unrecognized debug section: {}\n", n);
        outcome.failed = true;
        continue;
      }
      auto data = elf.relocated_section_data(sec);
      if (!data) { // readelf complains and goes on, with status 0
        outcome.warnings.add(std::move(data).error().in_file(elf.name()));
        continue;
      }
      FrameWalker walker(*data, sec.addr, n, addr_size, out, outcome.warnings, rows, elf.name());
      walker.run(separate ? fmt::format(" (loaded from {})", name) : std::string(), flush);
    }
  };
  render_file(file, display_name);
  if (separate) render_file(*separate, separate->name());
  return outcome;
}

} // namespace ehelf
