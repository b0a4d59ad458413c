#include "dwarf/cfi_encoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "dwarf/constants.hpp"
#include "model/registers.hpp"
#include "support/byte_writer.hpp"

namespace ehelf {

namespace {

constexpr int64_t kDataAlign = -8;
constexpr uint8_t kFdeEncoding = dw::EH_PE_pcrel | dw::EH_PE_sdata4;
constexpr uint8_t kHdrEncoding = dw::EH_PE_datarel | dw::EH_PE_sdata4;

void uleb(std::vector<uint8_t>& out, uint64_t v) {
  put_uleb(out, v);
}
void sleb(std::vector<uint8_t>& out, int64_t v) {
  put_sleb(out, v);
}
void u32(std::vector<uint8_t>& out, uint32_t v) {
  put_u32(out, v);
}
void patch_u32(std::vector<uint8_t>& out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// The CIE's initial row: CFA = rsp + 8, return address at CFA - 8 (every x86_64 call).
const CfaRule kInitialCfa{CfaRule::Kind::RegOffset, x86_64::RSP, 8, kNoExpression};
const RegisterRule kInitialRa{RegisterRule::Kind::Offset, 0, -8, kNoExpression};

// What makes functions share a CIE.
struct CieKey {
  uint16_t return_column;
  bool signal_frame;
  bool standard_start; // initial row as above, else an empty one
  // C++ exception handling: the personality routine, through the pointer at `personality_slot`
  // (indirect, as compilers emit DW.ref.__gxx_personality_v0) or at `personality`; and whether
  // FDEs carry an LSDA pointer.
  uint64_t personality_slot = 0;
  uint64_t personality = 0;
  bool lsda = false;
  auto operator<=>(const CieKey&) const = default;
};
constexpr uint8_t kPersonalityIndirect = dw::EH_PE_indirect | dw::EH_PE_pcrel | dw::EH_PE_sdata4;

struct Encoder {
  const UnwindTable& table;
  CfiFormat format;

  struct State {
    CfaRule cfa;
    std::vector<ColumnRule> columns;
    int64_t args_size = 0;
  };

  std::optional<Error> fail(uint64_t pc, std::string what) const {
    return Error::plain(fmt::format("cannot encode the row at {:#x}: {}", pc, what));
  }

  void block(std::vector<uint8_t>& out, uint32_t expr) const {
    const std::vector<uint8_t>& bytes = table.expression(expr).bytes();
    uleb(out, bytes.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
  }

  void advance(std::vector<uint8_t>& out, uint64_t delta) const {
    if (delta == 0) return;
    if (delta < 0x40)
      out.push_back(static_cast<uint8_t>(dw::CFA_advance_loc | delta));
    else if (delta <= 0xff) {
      out.push_back(dw::CFA_advance_loc1);
      out.push_back(static_cast<uint8_t>(delta));
    } else if (delta <= 0xffff) {
      out.push_back(dw::CFA_advance_loc2);
      out.push_back(static_cast<uint8_t>(delta));
      out.push_back(static_cast<uint8_t>(delta >> 8));
    } else {
      out.push_back(dw::CFA_advance_loc4);
      u32(out, static_cast<uint32_t>(delta));
    }
  }

  std::optional<Error> cfa_change(std::vector<uint8_t>& out, const CfaRule& from, const CfaRule& to,
                                  uint64_t pc) const {
    if (to == from) return std::nullopt;
    switch (to.kind) {
    case CfaRule::Kind::Undefined:
      return fail(pc, "the CFA becomes undefined");
    case CfaRule::Kind::Expression:
      out.push_back(dw::CFA_def_cfa_expression);
      block(out, to.expr);
      return std::nullopt;
    case CfaRule::Kind::RegOffset:
      break;
    }
    const bool same_reg = from.kind == CfaRule::Kind::RegOffset && from.reg == to.reg;
    if (to.offset >= 0) {
      if (same_reg) {
        out.push_back(dw::CFA_def_cfa_offset);
        uleb(out, static_cast<uint64_t>(to.offset));
      } else if (from.kind == CfaRule::Kind::RegOffset && from.offset == to.offset) {
        out.push_back(dw::CFA_def_cfa_register);
        uleb(out, to.reg);
      } else {
        out.push_back(dw::CFA_def_cfa);
        uleb(out, to.reg);
        uleb(out, static_cast<uint64_t>(to.offset));
      }
      return std::nullopt;
    }
    if (to.offset % kDataAlign != 0) return fail(pc, "a negative CFA offset not a multiple of 8");
    out.push_back(dw::CFA_def_cfa_sf);
    uleb(out, to.reg);
    sleb(out, to.offset / kDataAlign);
    return std::nullopt;
  }

  std::optional<Error> rule(std::vector<uint8_t>& out, uint16_t col, const RegisterRule& r,
                            const RegisterRule* initial, uint64_t pc) const {
    if (initial && *initial == r) {
      if (col < 64)
        out.push_back(static_cast<uint8_t>(dw::CFA_restore | col));
      else {
        out.push_back(dw::CFA_restore_extended);
        uleb(out, col);
      }
      return std::nullopt;
    }
    switch (r.kind) {
    case RegisterRule::Kind::Undefined:
      out.push_back(dw::CFA_undefined);
      uleb(out, col);
      break;
    case RegisterRule::Kind::SameValue:
      out.push_back(dw::CFA_same_value);
      uleb(out, col);
      break;
    case RegisterRule::Kind::Offset:
    case RegisterRule::Kind::ValOffset: {
      if (r.offset % kDataAlign != 0) return fail(pc, "a save offset not a multiple of 8");
      const int64_t f = r.offset / kDataAlign;
      const bool val = r.kind == RegisterRule::Kind::ValOffset;
      if (f >= 0 && !val && col < 64) {
        out.push_back(static_cast<uint8_t>(dw::CFA_offset | col));
        uleb(out, static_cast<uint64_t>(f));
      } else if (f >= 0) {
        out.push_back(val ? dw::CFA_val_offset : dw::CFA_offset_extended);
        uleb(out, col);
        uleb(out, static_cast<uint64_t>(f));
      } else {
        out.push_back(val ? dw::CFA_val_offset_sf : dw::CFA_offset_extended_sf);
        uleb(out, col);
        sleb(out, f);
      }
      break;
    }
    case RegisterRule::Kind::Register:
      out.push_back(dw::CFA_register);
      uleb(out, col);
      uleb(out, r.reg);
      break;
    case RegisterRule::Kind::Expression:
    case RegisterRule::Kind::ValExpression:
      out.push_back(r.kind == RegisterRule::Kind::Expression ? dw::CFA_expression
                                                             : dw::CFA_val_expression);
      uleb(out, col);
      block(out, r.expr);
      break;
    case RegisterRule::Kind::Architectural:
      return fail(pc, "an architectural rule");
    }
    return std::nullopt;
  }

  // Writes the instructions that turn `state` into `row` (and updates `state`).
  std::optional<Error> transition(std::vector<uint8_t>& out, State& state, RowView row,
                                  int64_t args_size, const State& initial, uint64_t pc) const {
    if (auto e = cfa_change(out, state.cfa, row.cfa, pc)) return e;
    auto initial_rule = [&](uint16_t col) -> const RegisterRule* {
      for (const ColumnRule& c : initial.columns)
        if (c.column == col) return &c.rule;
      return nullptr;
    };
    // Merge the two sorted column lists.
    size_t i = 0, j = 0;
    while (i < state.columns.size() || j < row.columns.size()) {
      const bool take_old =
          j == row.columns.size() ||
          (i < state.columns.size() && state.columns[i].column < row.columns[j].column);
      const bool take_new =
          i == state.columns.size() ||
          (j < row.columns.size() && row.columns[j].column < state.columns[i].column);
      if (take_old) { // the column loses its rule
        const uint16_t col = state.columns[i].column;
        if (initial_rule(col)) return fail(pc, fmt::format("column {} loses its rule", col));
        if (col < 64)
          out.push_back(static_cast<uint8_t>(dw::CFA_restore | col));
        else {
          out.push_back(dw::CFA_restore_extended);
          uleb(out, col);
        }
        ++i;
      } else if (take_new) {
        if (auto e = rule(out, row.columns[j].column, row.columns[j].rule,
                          initial_rule(row.columns[j].column), pc))
          return e;
        ++j;
      } else {
        if (!(state.columns[i].rule == row.columns[j].rule))
          if (auto e = rule(out, row.columns[j].column, row.columns[j].rule,
                            initial_rule(row.columns[j].column), pc))
            return e;
        ++i, ++j;
      }
    }
    if (args_size != state.args_size) {
      if (args_size < 0) return fail(pc, "a negative args_size");
      out.push_back(dw::CFA_GNU_args_size);
      uleb(out, static_cast<uint64_t>(args_size));
    }
    state.cfa = row.cfa;
    state.columns.assign(row.columns.begin(), row.columns.end());
    state.args_size = args_size;
    return std::nullopt;
  }

  static State initial_state(const CieKey& key) {
    State s;
    if (key.standard_start) {
      s.cfa = kInitialCfa;
      s.columns.push_back({key.return_column, kInitialRa});
    }
    return s;
  }

  void write_cie(std::vector<uint8_t>& out, const CieKey& key, uint64_t eh_frame_addr) const {
    const size_t start = out.size();
    const bool eh = format == CfiFormat::EhFrame;
    u32(out, 0);                    // length, patched below
    u32(out, eh ? 0 : 0xffffffffu); // CIE id
    // .debug_frame: version 1 as gas writes it, 3 where the return column needs a ULEB.
    const uint8_t version = eh || key.return_column <= 0xff ? 1 : 3;
    out.push_back(version);
    const bool personality = key.personality_slot || key.personality;
    // .debug_frame has no pointers to encode: an augmentation only for a signal frame ("zS",
    // gdb's and readelf's spelling; "S" alone has no defined place without 'z').
    std::string aug;
    if (eh) {
      aug = "z";
      if (personality) aug += 'P';
      if (key.lsda) aug += 'L';
      aug += key.signal_frame ? "RS" : "R";
    } else if (key.signal_frame)
      aug = "zS";
    out.insert(out.end(), aug.begin(), aug.end());
    out.push_back(0);
    uleb(out, 1);
    sleb(out, kDataAlign);
    if (version == 1)
      out.push_back(static_cast<uint8_t>(key.return_column));
    else
      uleb(out, key.return_column);
    if (eh) {
      uleb(out, 1 + (personality ? 5 : 0) + (key.lsda ? 1 : 0));
      if (personality) {
        out.push_back(key.personality_slot ? kPersonalityIndirect : kFdeEncoding);
        const uint64_t target = key.personality_slot ? key.personality_slot : key.personality;
        u32(out, static_cast<uint32_t>(target - (eh_frame_addr + out.size())));
      }
      if (key.lsda) out.push_back(kFdeEncoding);
      out.push_back(kFdeEncoding);
    } else if (!aug.empty())
      uleb(out, 0);
    if (key.standard_start) {
      out.push_back(dw::CFA_def_cfa);
      uleb(out, x86_64::RSP);
      uleb(out, 8);
      if (key.return_column < 64)
        out.push_back(static_cast<uint8_t>(dw::CFA_offset | key.return_column));
      else {
        out.push_back(dw::CFA_offset_extended);
        uleb(out, key.return_column);
      }
      uleb(out, 1);
    }
    while ((out.size() - start) % 8)
      out.push_back(dw::CFA_nop);
    patch_u32(out, start, static_cast<uint32_t>(out.size() - start - 4));
  }

  struct Run {
    size_t first, last; // ranges [first, last]
  };

  // .eh_frame: pointers pc-relative to `frame_addr`, and the .eh_frame_hdr at `hdr_addr`.
  // .debug_frame: absolute addresses, CIE pointers as section offsets, no header.
  Result<EncodedCfi> encode(uint64_t frame_addr, uint64_t hdr_addr,
                            std::vector<LeftOutFde>* left_out) const {
    const bool eh = format == CfiFormat::EhFrame;
    std::span<const TableRange> ranges = table.ranges();
    // Contiguous runs of one function's ranges become FDEs. A function with an LSDA keeps one
    // FDE across gaps (its landing pads are offsets from the FDE's start): the row before a gap
    // covers it.
    std::vector<Run> runs;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (!runs.empty() && ranges[runs.back().last].function == ranges[i].function &&
          (ranges[runs.back().last].end == ranges[i].begin ||
           table.function(ranges[i].function).lsda))
        runs.back().last = i;
      else
        runs.push_back({i, i});
    }
    EncodedCfi result;
    std::vector<uint8_t>& out = result.frame;
    std::map<CieKey, uint64_t> cies;                   // key -> offset of the CIE
    std::vector<std::pair<uint64_t, uint64_t>> search; // (pc_begin, FDE address)
    uint64_t previous_end = 0;
    for (const Run& run : runs) {
      const TableRange& head = ranges[run.first];
      const FunctionInfo& f = table.function(head.function);
      const RowView first_row = table.row(head.row);
      const RegisterRule* ra = first_row.rule_for(f.return_column);
      // .debug_frame carries no exception-handling data (gcc writes none there either).
      CieKey key{f.return_column,
                 f.signal_frame,
                 first_row.cfa.kind != CfaRule::Kind::Undefined && ra != nullptr,
                 eh ? f.personality_slot : 0,
                 eh && !f.personality_slot ? f.personality : 0,
                 eh && f.lsda != 0};
      const size_t cie_or_fde = out.size(); // where this run's bytes start
      const uint64_t end_before = previous_end;
      auto [it, fresh] = cies.try_emplace(key, out.size());
      if (fresh) write_cie(out, key, frame_addr);
      const State initial = initial_state(key);
      State state = initial;

      const size_t start = out.size();
      u32(out, 0);
      // CIE pointer: back from here in .eh_frame, the section offset in .debug_frame.
      u32(out, static_cast<uint32_t>(eh ? out.size() - it->second : it->second));
      // An LSDA's offsets count from the function's start, which its first analysed instruction
      // may lie after (a cold part entered in its middle): the FDE then starts there, with the
      // initial row until the first range.
      const bool from_start = f.lsda && f.pc_begin < head.begin && f.pc_begin >= previous_end;
      const uint64_t begin = from_start ? f.pc_begin : head.begin, end = ranges[run.last].end;
      previous_end = end;
      if (eh) {
        u32(out, static_cast<uint32_t>(begin - (frame_addr + out.size())));
        u32(out, static_cast<uint32_t>(end - begin));
        if (key.lsda) { // augmentation data: the LSDA pointer
          uleb(out, 4);
          u32(out, static_cast<uint32_t>(f.lsda - (frame_addr + out.size())));
        } else
          uleb(out, 0);
      } else {
        put_u64(out, begin);
        put_u64(out, end - begin);
        if (key.signal_frame) uleb(out, 0); // the "zS" CIE's (empty) augmentation data
      }
      uint64_t loc = begin;
      std::optional<Error> failed;
      for (size_t r = run.first; r <= run.last && !failed; ++r) {
        advance(out, ranges[r].begin - loc);
        loc = ranges[r].begin;
        failed = transition(out, state, table.row(ranges[r].row), ranges[r].args_size, initial,
                            ranges[r].begin);
      }
      if (failed) {
        if (!left_out) return std::move(*failed);
        left_out->push_back({head.function, begin, std::move(*failed)});
        out.resize(fresh ? cie_or_fde : start); // this FDE, and its CIE if it was the first
        if (fresh) cies.erase(it);
        previous_end = end_before;
        continue;
      }
      while ((out.size() - start) % 8)
        out.push_back(dw::CFA_nop);
      patch_u32(out, start, static_cast<uint32_t>(out.size() - start - 4));
      search.emplace_back(begin, frame_addr + start);
    }
    result.fde_count = search.size();
    if (!eh) return result; // .debug_frame has no terminator and no search table
    u32(out, 0);            // terminator

    std::vector<uint8_t>& hdr = result.eh_frame_hdr;
    hdr = {1, kFdeEncoding, dw::EH_PE_udata4, kHdrEncoding};
    u32(hdr, static_cast<uint32_t>(frame_addr - (hdr_addr + 4)));
    u32(hdr, static_cast<uint32_t>(search.size()));
    std::sort(search.begin(), search.end());
    for (auto [pc, fde] : search) {
      u32(hdr, static_cast<uint32_t>(pc - hdr_addr));
      u32(hdr, static_cast<uint32_t>(fde - hdr_addr));
    }
    return result;
  }
};

} // namespace

Result<EncodedCfi> encode_cfi(const UnwindTable& table, CfiFormat format, uint64_t frame_addr,
                              uint64_t hdr_addr, std::vector<LeftOutFde>* left_out) {
  return Encoder{table, format}.encode(frame_addr, hdr_addr, left_out);
}

} // namespace ehelf

#include <elf.h>

#include "elf/elf_patch.hpp"
#include "elf/elf_writer.hpp"

namespace ehelf {

namespace {

// Section indexes from SHN_LORESERVE (0xff00) on are not indexes: an image holds fewer sections
// (with its null section and .shstrtab).
constexpr size_t kMaxImageSections = 0xff00 - 2;
// How far above the code .eh_frame may go: pc-relative 32-bit pointers reach +-2 GiB.
constexpr uint64_t kNearCode = uint64_t(1) << 30;

// What makes an image a separate debug file for `source`: its notes, copied (the build id is
// what debug files are found and checked by), and its other allocated sections as SHT_NOBITS
// headers of the same name, address and size (gdb places a debug file's contents by matching
// its sections to the running file's by name). Sections named as one of `ours` are left out.
void add_debug_file_sections(const ElfFile& source, std::vector<ImageSection>& sections,
                             std::span<const std::string_view> ours) {
  for (const Section& s : source.sections()) {
    if (!(s.flags & SHF_ALLOC) || s.type == SHT_NULL ||
        std::find(ours.begin(), ours.end(), s.name) != ours.end())
      continue;
    if (sections.size() >= kMaxImageSections) break; // a hostile file's: the rest is not needed

    ImageSection copy;
    copy.name = s.name;
    copy.addr = s.addr;
    // What the section is; its links to other sections (SHF_INFO_LINK) are not copied.
    copy.flags = s.flags & (SHF_WRITE | SHF_ALLOC | SHF_EXECINSTR | SHF_TLS);
    copy.align = 1;
    copy.size = s.size;
    copy.kind = ImageSection::Kind::Placeholder;
    if (s.type == SHT_NOTE)
      if (auto bytes = source.section_data(s)) {
        copy.kind = ImageSection::Kind::FileOnly;
        copy.type = SHT_NOTE;
        copy.bytes.assign(bytes->begin(), bytes->end());
        copy.align = 4;
      }
    sections.push_back(std::move(copy));
  }
}

} // namespace

Result<std::vector<uint8_t>> encode_cfi_elf(const UnwindTable& table,
                                            const CfiElfOptions& options) {
  std::vector<ImageSection> sections;
  if (options.format == CfiFormat::DebugFrame) {
    auto cfi = encode_cfi(table, CfiFormat::DebugFrame, 0, 0, options.left_out);
    if (!cfi) return std::move(cfi).error();
    ImageSection debug_frame{".debug_frame", 0, std::move(cfi->frame), 8};
    debug_frame.kind = ImageSection::Kind::FileOnly;
    debug_frame.flags = 0;
    sections.push_back(std::move(debug_frame));
  } else {
    // Above the code, and above the source's sections (the image then overlaps none of its
    // placeholders) where .eh_frame's 32-bit offsets still reach the code from there.
    uint64_t bottom = UINT64_MAX, top = 0;
    for (const TableRange& r : table.ranges()) {
      bottom = std::min(bottom, r.begin);
      top = std::max(top, r.end);
    }
    uint64_t above_sections = top;
    if (options.source)
      for (const Section& s : options.source->sections())
        if (s.flags & SHF_ALLOC && s.addr + s.size >= s.addr)
          above_sections = std::max(above_sections, s.addr + s.size);
    if (above_sections - std::min(bottom, top) < kNearCode) top = above_sections;
    const uint64_t hdr_addr = (top + 0xfff) / 0x1000 * 0x1000;
    const uint64_t hdr_size = 12 + 8 * table.ranges().size(); // an upper bound: one FDE per range
    const uint64_t eh_frame_addr = (hdr_addr + hdr_size + 7) / 8 * 8;
    auto cfi = encode_cfi(table, CfiFormat::EhFrame, eh_frame_addr, hdr_addr, options.left_out);
    if (!cfi) return std::move(cfi).error();
    sections.push_back({".eh_frame_hdr", hdr_addr, std::move(cfi->eh_frame_hdr), 4});
    sections.push_back({".eh_frame", eh_frame_addr, std::move(cfi->frame), 8});
  }
  if (options.source) {
    const std::string_view ours[] = {".eh_frame", ".eh_frame_hdr", ".debug_frame"};
    add_debug_file_sections(*options.source, sections, ours);
  }
  return write_elf_image(sections);
}

Result<std::vector<uint8_t>> encode_cfi_patch(const ElfFile& elf, const UnwindTable& table,
                                              std::vector<LeftOutFde>* left_out) {
  auto plan = plan_append(elf);
  if (!plan) return std::move(plan).error();
  // The header's size depends on the FDE count only (the same FDEs are left out both times).
  std::vector<LeftOutFde> sizing;
  auto sized = encode_cfi(table, CfiFormat::EhFrame, 0, 0, left_out ? &sizing : nullptr);
  if (!sized) return std::move(sized).error();
  const uint64_t hdr_addr = plan->content_addr;
  const uint64_t eh_frame_addr = (hdr_addr + sized->eh_frame_hdr.size() + 7) / 8 * 8;
  auto cfi = encode_cfi(table, CfiFormat::EhFrame, eh_frame_addr, hdr_addr, left_out);
  if (!cfi) return std::move(cfi).error();
  std::vector<ImageSection> sections;
  sections.push_back({".eh_frame_hdr", hdr_addr, std::move(cfi->eh_frame_hdr), 4});
  sections.push_back({".eh_frame", eh_frame_addr, std::move(cfi->frame), 8});
  return append_loaded_sections(elf, *plan, sections);
}

} // namespace ehelf
