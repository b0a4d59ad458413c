#include "report/readelf_frames.hpp"

#include <algorithm>
#include <elf.h>
#include <fmt/format.h>
#include <iterator>
#include <vector>

#include "dwarf/cfa_instruction.hpp"
#include "dwarf/constants.hpp"
#include "model/registers.hpp"

namespace ehelf {
namespace {

// readelf's x86_64 register table has 126 entries, and it refuses register numbers above that
// count (its check is `reg > count`, so 126 itself is accepted).
constexpr unsigned kReadelfRegisterCount = 126;

// readelf's column states: a DW_CFA opcode that set the rule, or "unreferenced".
enum class Col : uint8_t { Unreferenced, Undefined, SameValue, Offset, ValOffset, Register,
                           Expression, ValExpression };

// readelf's Frame_Chunk: the mutable row state while walking one CIE or FDE.
struct Chunk {
  std::vector<Col> type;
  std::vector<int> offset; // readelf stores column offsets as int
  unsigned cfa_reg = 0;
  uint64_t cfa_offset = 0;
  bool cfa_exp = false;
  unsigned ra = 0;
  uint64_t pc = 0;

  unsigned ncols() const { return static_cast<unsigned>(type.size()); }
  // readelf's frame_need_space: grows the arrays; -1 if the register is out of its table.
  int need_space(uint64_t reg) {
    if (reg < ncols()) return 0;
    if (reg > kReadelfRegisterCount) return -1;
    type.resize(reg + 1, Col::Unreferenced);
    offset.resize(reg + 1, 0);
    return 1;
  }
};

// readelf's regname(): the name alone, or "rN (name)"; "rN" for unnamed registers.
std::string reg_name(unsigned r, bool name_only) {
  auto n = x86_64::register_name(r);
  if (n.empty()) return fmt::format("r{}", r);
  if (name_only) return std::string(n);
  return fmt::format("r{} ({})", r, n);
}

class Renderer {
public:
  Renderer(std::string& out) : out_(out) {}

  void display_row(const Chunk& fc) {
    if (need_headers_) {
      need_headers_ = false;
      out_ += "   LOC           CFA      ";
      for (unsigned r = 0; r < fc.ncols(); ++r)
        if (fc.type[r] != Col::Unreferenced) {
          if (r == fc.ra) out_ += "ra    ";
          else padded(reg_name(r, true), 5);
        }
      out_ += '\n';
    }
    hex16(fc.pc);
    out_ += ' ';
    if (fc.cfa_exp) out_ += "exp      ";
    else {
      size_t start = out_.size();
      auto name = x86_64::register_name(fc.cfa_reg);
      if (name.empty()) fmt::format_to(std::back_inserter(out_), "r{}", fc.cfa_reg);
      else out_ += name;
      signed_int(static_cast<int>(fc.cfa_offset));
      pad_from(start, 8);
    }
    for (unsigned r = 0; r < fc.ncols(); ++r) {
      switch (fc.type[r]) {
      case Col::Unreferenced: continue;
      case Col::Undefined: out_ += "u     "; break;
      case Col::SameValue: out_ += "s     "; break;
      case Col::Offset:
      case Col::ValOffset: {
        size_t start = out_.size();
        out_ += fc.type[r] == Col::Offset ? 'c' : 'v';
        signed_int(fc.offset[r]);
        pad_from(start, 5);
        break;
      }
      case Col::Register: padded(reg_name(static_cast<unsigned>(fc.offset[r]), false), 5); break;
      case Col::Expression: out_ += "exp   "; break;
      case Col::ValExpression: out_ += "vexp  "; break;
      }
    }
    out_ += '\n';
  }

  // Hand-rolled formatting for the per-row cells: this loop prints millions of them, and
  // fmt's width handling (Unicode-aware) dominated the profile.
  void hex16(uint64_t v) {
    char buf[16];
    for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = "0123456789abcdef"[v & 15];
    out_.append(buf, 16);
  }
  void signed_int(int v) { // printf's "%+d"
    char buf[16];
    int n = 0;
    uint32_t mag = v < 0 ? 0u - static_cast<uint32_t>(v) : static_cast<uint32_t>(v);
    do {
      buf[n++] = static_cast<char>('0' + mag % 10);
      mag /= 10;
    } while (mag);
    out_ += v < 0 ? '-' : '+';
    while (n) out_ += buf[--n];
  }
  // Pads what was appended since `start` to `width`, then adds the separating space.
  void pad_from(size_t start, size_t width) {
    size_t len = out_.size() - start;
    if (len < width) out_.append(width - len, ' ');
    out_ += ' ';
  }
  void padded(std::string_view text, size_t width) {
    size_t start = out_.size();
    out_ += text;
    pad_from(start, width);
  }

  // Runs one CIE or FDE program the way readelf's display_debug_frames does. `cie` is the CIE's
  // state after its own program (for DW_CFA_restore); for a CIE it is the chunk itself.
  void run(Chunk& fc, const Chunk& cie_state, const Cie& cie,
           const std::vector<CfaInstruction>& program) {
    need_headers_ = true;
    // Pass 1: size the columns and mark every register the program mentions as referenced.
    for (const CfaInstruction& in : program) {
      if (!mentions_register(in.opcode)) continue;
      if (fc.need_space(in.reg) < 0) continue;
      unsigned reg = static_cast<unsigned>(in.reg);
      if (reg >= cie_state.ncols() || cie_state.type[reg] == Col::Unreferenced)
        fc.type[reg] = Col::Undefined;
      else fc.type[reg] = cie_state.type[reg];
    }
    // Pass 2: interpret, printing a row before every location change.
    bool all_nops = true;
    // readelf keeps the data factor as an int; multiply with wrap-around like its code does
    // (without the undefined behaviour of a signed overflow).
    uint64_t data_factor = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int>(cie.data_align)));
    auto times_factor = [&](int64_t v) { return static_cast<uint64_t>(v) * data_factor; };
    for (const CfaInstruction& in : program) {
      if (in.opcode != dw::CFA_nop) all_nops = false;
      unsigned reg = static_cast<unsigned>(in.reg);
      bool reg_ok = in.reg < fc.ncols();
      auto set = [&](Col t, int off) {
        if (!reg_ok) return;
        fc.type[reg] = t;
        fc.offset[reg] = off;
      };
      switch (in.opcode) {
      case dw::CFA_advance_loc:
        // readelf multiplies the short form in 32 bits.
        display_row(fc);
        fc.pc += static_cast<uint32_t>(in.delta * cie.code_align);
        break;
      case dw::CFA_advance_loc1:
      case dw::CFA_advance_loc2:
      case dw::CFA_advance_loc4:
      case dw::CFA_MIPS_advance_loc8:
        display_row(fc);
        fc.pc += in.delta * cie.code_align;
        break;
      case dw::CFA_set_loc:
        display_row(fc);
        fc.pc = in.address;
        break;
      case dw::CFA_offset:
      case dw::CFA_offset_extended:
        set(Col::Offset, static_cast<int>(times_factor(in.operand)));
        break;
      case dw::CFA_val_offset:
        set(Col::ValOffset, static_cast<int>(times_factor(in.operand)));
        break;
      case dw::CFA_offset_extended_sf:
        set(Col::Offset, static_cast<int>(times_factor(in.operand)));
        break;
      case dw::CFA_val_offset_sf:
        set(Col::ValOffset, static_cast<int>(times_factor(in.operand)));
        break;
      case dw::CFA_GNU_negative_offset_extended:
        set(Col::Offset, static_cast<int>(0 - times_factor(in.operand)));
        break;
      case dw::CFA_restore:
      case dw::CFA_restore_extended:
        if (!reg_ok) break;
        if (reg >= cie_state.ncols() || cie_state.type[reg] == Col::Unreferenced) {
          fc.type[reg] = Col::Undefined;
          fc.offset[reg] = 0;
        } else {
          fc.type[reg] = cie_state.type[reg];
          fc.offset[reg] = cie_state.offset[reg];
        }
        break;
      case dw::CFA_undefined: set(Col::Undefined, 0); break;
      case dw::CFA_same_value: set(Col::SameValue, 0); break;
      case dw::CFA_register: set(Col::Register, static_cast<int>(in.reg2)); break;
      case dw::CFA_expression: set(Col::Expression, reg_ok ? fc.offset[reg] : 0); break;
      case dw::CFA_val_expression: set(Col::ValExpression, reg_ok ? fc.offset[reg] : 0); break;
      case dw::CFA_remember_state:
        remembered_.push_back(
            Saved{fc.type, fc.offset, fc.cfa_reg, fc.cfa_offset, fc.cfa_exp, fc.ra});
        break;
      case dw::CFA_restore_state:
        if (remembered_.empty()) {
          out_ += "Mismatched DW_CFA_restore_state\n";
          break;
        }
        {
          Saved& s = remembered_.back();
          fc.cfa_reg = s.cfa_reg;
          fc.cfa_offset = s.cfa_offset;
          fc.cfa_exp = s.cfa_exp;
          fc.ra = s.ra;
          // Only the columns that existed when remembered are restored (the state may come from
          // another FDE with more columns: grow first, as readelf does).
          if (s.type.size() > fc.type.size()) {
            fc.type.resize(s.type.size(), Col::Unreferenced);
            fc.offset.resize(s.type.size(), 0);
          }
          std::copy(s.type.begin(), s.type.end(), fc.type.begin());
          std::copy(s.offset.begin(), s.offset.end(), fc.offset.begin());
          remembered_.pop_back();
        }
        break;
      case dw::CFA_def_cfa:
        fc.cfa_reg = reg;
        fc.cfa_offset = static_cast<uint64_t>(in.operand);
        fc.cfa_exp = false;
        break;
      case dw::CFA_def_cfa_sf:
        fc.cfa_reg = reg;
        fc.cfa_offset = times_factor(in.operand);
        fc.cfa_exp = false;
        break;
      case dw::CFA_def_cfa_register:
        fc.cfa_reg = reg;
        fc.cfa_exp = false;
        break;
      case dw::CFA_def_cfa_offset: fc.cfa_offset = static_cast<uint64_t>(in.operand); break;
      case dw::CFA_def_cfa_offset_sf:
        fc.cfa_offset = times_factor(in.operand);
        break;
      case dw::CFA_def_cfa_expression: fc.cfa_exp = true; break;
      default: break; // nop, GNU_args_size, GNU_window_save: no effect on the table
      }
    }
    if (!all_nops) display_row(fc);
  }

private:
  static bool mentions_register(uint8_t op) {
    switch (op) {
    case dw::CFA_offset:
    case dw::CFA_restore:
    case dw::CFA_offset_extended:
    case dw::CFA_val_offset:
    case dw::CFA_restore_extended:
    case dw::CFA_undefined:
    case dw::CFA_same_value:
    case dw::CFA_register:
    case dw::CFA_expression:
    case dw::CFA_val_expression:
    case dw::CFA_offset_extended_sf:
    case dw::CFA_val_offset_sf:
    case dw::CFA_GNU_negative_offset_extended: return true;
    default: return false;
    }
  }

  // readelf keeps one remember_state stack for the whole section: a restore_state in one FDE
  // can pop what an earlier FDE pushed.
  struct Saved {
    std::vector<Col> type;
    std::vector<int> offset;
    unsigned cfa_reg;
    uint64_t cfa_offset;
    bool cfa_exp;
    unsigned ra;
  };
  std::vector<Saved> remembered_;
  std::string& out_;
  bool need_headers_ = true;
};

Status render_section(const CfiSection& s, const PointerBases& bases,
                      const std::string& display_name, std::string& out, std::FILE* sink) {
  if (display_name.empty()) out += fmt::format("Contents of the {} section:\n\n", s.name);
  else out += fmt::format("Contents of the {} section (loaded from {}):\n\n", s.name, display_name);
  Renderer renderer(out);
  std::vector<Chunk> cie_states(s.cies.size());

  // A CIE's state after its own program; `r` prints its row.
  auto run_cie = [&](uint32_t index, Renderer& r) -> Status {
    const Cie& cie = s.cies[index];
    auto program = decode_cfa_program(s, cie, nullptr, bases);
    if (!program) return std::move(program).error();
    Chunk fc;
    fc.ra = static_cast<unsigned>(cie.ra_register);
    fc.need_space(fc.ra);
    r.run(fc, fc, cie, *program);
    cie_states[index] = std::move(fc);
    return Ok{};
  };

  for (const CfiEntry& e : s.entries) {
    if (sink && out.size() > (1u << 16)) {
      std::fwrite(out.data(), 1, out.size(), sink);
      out.clear();
    }
    switch (e.kind) {
    case CfiEntry::Kind::Terminator:
      out += fmt::format("\n{:08x} ZERO terminator\n\n", e.offset);
      break;
    case CfiEntry::Kind::Cie: {
      const Cie& cie = s.cies[e.index];
      uint64_t id = s.format == CfiFormat::EhFrame ? 0 : (cie.dwarf64 ? UINT64_MAX : UINT32_MAX);
      out += fmt::format("\n{:08x} {:016x} {:0{}x} CIE \"{}\" cf={} df={} ra={}\n", e.offset,
                         cie.length, id, cie.dwarf64 ? 16 : 8, cie.augmentation, cie.code_align,
                         static_cast<int>(cie.data_align), static_cast<int>(cie.ra_register));
      if (auto st = run_cie(e.index, renderer); !st) return st;
      break;
    }
    case CfiEntry::Kind::Fde: {
      const Fde& fde = s.fdes[e.index];
      const Cie& cie = s.cies[fde.cie];
      // A CIE later in the section: readelf prints that CIE's length in the FDE line and starts
      // from a blank state, without running the CIE's instructions.
      bool forward = cie.offset > fde.offset;
      out += fmt::format("\n{:08x} {:016x} {:0{}x} FDE cie={:08x} pc={:016x}..{:016x}\n", e.offset,
                         forward ? cie.length : fde.length, fde.cie_pointer, fde.dwarf64 ? 16 : 8,
                         cie.offset, fde.pc_begin, fde.pc_begin + fde.pc_range);
      auto program = decode_cfa_program(s, cie, &fde, bases);
      if (!program) return std::move(program).error();
      static const Chunk blank;
      Chunk fc = forward ? blank : cie_states[fde.cie];
      fc.cfa_exp = false; // not inherited from the CIE
      fc.ra = static_cast<unsigned>(cie.ra_register);
      fc.need_space(fc.ra);
      fc.pc = fde.pc_begin;
      renderer.run(fc, forward ? blank : cie_states[fde.cie], cie, *program);
      break;
    }
    }
  }
  out += "\n";
  if (s.error) return *s.error;
  return Ok{};
}

} // namespace

Status render_readelf_frames(const ModuleCfi& module, const ModuleCfi* separate,
                             const std::string& display_name, std::string& out,
                             std::FILE* sink) {
  // readelf names the file a section came from only once it has found a separate debug file.
  auto render_file = [&](const ModuleCfi& m, const std::string& name) -> Status {
    std::string shown = separate ? name : std::string();
    for (const Section& sec : m.elf->sections()) {
      const CfiSection* cfi = nullptr;
      const PointerBases* bases = nullptr;
      if (sec.name == ".eh_frame" && m.eh_frame) {
        cfi = &*m.eh_frame;
        bases = &m.eh_frame_bases;
      } else if (sec.name == ".debug_frame" && m.debug_frame && !m.debug_elf) {
        cfi = &*m.debug_frame;
        bases = &m.debug_frame_bases;
      } else if (sec.name != ".eh_frame" && sec.name != ".debug_frame") {
        continue;
      }
      if (sec.type == SHT_NOBITS) {
        out += fmt::format("section '{}' has the NOBITS type - its contents are unreliable.\n",
                           sec.name);
        continue;
      }
      if (sec.size == 0) {
        out += fmt::format("\nSection '{}' has no debugging data.\n", sec.name);
        continue;
      }
      if (!cfi || sec.index != m.elf->find_section(sec.name)->index) continue;
      if (auto st = render_section(*cfi, *bases, shown, out, sink); !st)
        return std::move(st).error().in_file(m.elf->name());
    }
    return Ok{};
  };
  if (auto st = render_file(module, display_name); !st) return st;
  if (separate)
    if (auto st = render_file(*separate, separate->elf->name()); !st) return st;
  return Ok{};
}

} // namespace ehelf
