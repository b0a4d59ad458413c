#include "dwarf/module_cfi.hpp"

#include <algorithm>
#include <elf.h>
#include <fmt/format.h>

#include "dwarf/cfa_interpreter.hpp"
#include "dwarf/cfi_limits.hpp"
#include "dwarf/fde_function.hpp"

namespace ehelf {
namespace {

// Reads a u64 stored at SVMA `addr` in the file's loaded image (for DW_EH_PE_indirect).
bool read_file_u64(const ElfFile& elf, uint64_t addr, uint64_t& out) {
  for (const Segment& s : elf.segments()) {
    if (s.type != PT_LOAD || addr < s.vaddr || addr + 8 > s.vaddr + s.filesz) continue;
    uint64_t off = s.offset + (addr - s.vaddr);
    auto bytes = elf.bytes();
    if (off > bytes.size() || bytes.size() - off < 8) return false;
    std::memcpy(&out, bytes.data() + off, 8);
    return true;
  }
  return false;
}

PointerBases bases_for(const ElfFile& elf, const Section& s) {
  PointerBases b;
  b.section_addr = s.addr;
  if (const Section* got = elf.find_section(".got")) b.data_base = got->addr;
  if (const Section* text = elf.find_section(".text")) b.text_base = text->addr;
  b.read_indirect = [&elf](uint64_t addr, uint64_t& out) { return read_file_u64(elf, addr, out); };
  return b;
}

} // namespace

Result<MadeSearchTable> make_search_table(const ElfFile& elf) {
  const Section* eh = elf.find_section(".eh_frame");
  if (!eh || eh->type == SHT_NOBITS)
    return Error::plain("no .eh_frame to make a search table of").in_file(elf.name());
  auto data = elf.section_data(*eh);
  if (!data) return std::move(data).error().in_file(elf.name());
  const CfiSection section =
      parse_cfi_section(*data, CfiFormat::EhFrame, ".eh_frame", bases_for(elf, *eh));
  std::vector<EhFrameHdr::Entry> entries;
  entries.reserve(section.fdes.size());
  for (const Fde& f : section.fdes)
    if (f.pc_range) entries.push_back({f.pc_begin, eh->addr + f.offset});
  if (entries.empty()) return Error::plain(".eh_frame has no FDE").in_file(elf.name());
  auto hdr = encode_eh_frame_hdr(std::move(entries), eh->addr, eh->addr);
  if (!hdr)
    return Error::plain(".eh_frame's FDEs are too far apart for a search table")
        .in_file(elf.name());
  return MadeSearchTable{std::move(*hdr), eh->addr, *data, eh->addr};
}

namespace {

Status build_from(const CfiSection& section, const PointerBases& bases, bool relocatable,
                  UnwindTable& table, TableBuildStats& stats) {
  CfaInterpreter interp(table);
  // Visit FDEs in address order so the table's ranges arrive sorted (finish() then skips its
  // sort); a stable sort keeps section order among FDEs that start at the same address.
  std::vector<uint32_t> order(section.fdes.size());
  for (uint32_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return section.fdes[a].pc_begin < section.fdes[b].pc_begin;
  });
  for (uint32_t index : order) {
    const Fde& fde = section.fdes[index];
    ++stats.fdes;
    if (fde.pc_range == 0 || (fde.pc_begin == 0 && !relocatable)) {
      ++stats.empty_fdes;
      continue;
    }
    const uint32_t function = table.add_function(function_of(section, fde));
    auto st = interp.run(section, section.cies[fde.cie], fde, bases, [&](const InterpretedRow& r) {
      ++stats.rows;
      uint32_t row = table.intern_row(r.state->cfa, r.state->columns);
      table.add_range(TableRange{r.begin, r.end, row, function, r.state->args_size});
    });
    if (!st) return st;
    // Checked per FDE: one FDE adds at most cfi_limits::kMaxRowsPerFde beyond the limits.
    if (stats.rows > cfi_limits::kMaxRowsPerModule)
      return Error::at(section.name, fde.offset,
                       fmt::format("more than {} rows in the module's tables: refused",
                                   cfi_limits::kMaxRowsPerModule));
    if (table.row_count() > cfi_limits::kMaxDistinctRowsPerModule)
      return Error::at(section.name, fde.offset,
                       fmt::format("more than {} distinct rows in the module's tables: refused",
                                   cfi_limits::kMaxDistinctRowsPerModule));
  }
  return Ok{};
}

// The separate debug file of `module` (LoadOptions::debug_dirs), unless its build id says it
// belongs to another file: gdb refuses such a file too.
std::unique_ptr<ElfFile> open_debug_file(const ElfFile& module,
                                         std::span<const std::string> debug_dirs) {
  std::string path = module.find_debug_file(debug_dirs);
  if (path.empty()) return nullptr;
  auto dbg = ElfFile::open(path);
  if (!dbg) return nullptr;
  auto want = module.build_id(), have = (*dbg)->build_id();
  if (want && have && !std::equal(want->begin(), want->end(), have->begin(), have->end()))
    return nullptr;
  return std::move(*dbg);
}

} // namespace

const ElfFile& ModuleCfi::owner(const CfiSection& section) const {
  const bool separate =
      debug_frame && &section == &*debug_frame ? debug_elf != nullptr : eh_frame_separate;
  return separate ? *debug_elf : *elf;
}

std::optional<Error> ModuleCfi::first_error() const {
  for (const auto* s : {eh_frame ? &*eh_frame : nullptr, debug_frame ? &*debug_frame : nullptr})
    if (s && s->error) {
      Error e = *s->error;
      return std::move(e).in_file(owner(*s).name());
    }
  return std::nullopt;
}

Result<ModuleCfi> load_module_cfi(const std::string& path, const LoadOptions& options) {
  auto elf = ElfFile::open(path);
  if (!elf) return std::move(elf).error();
  return load_module_cfi(std::move(*elf), options);
}

Result<ModuleCfi> load_module_cfi(std::unique_ptr<ElfFile> elf, const LoadOptions& options) {
  ModuleCfi m;
  m.elf = std::move(elf);
  const ElfFile& f = *m.elf;
  auto parse = [&](const ElfFile& file, const Section& s, CfiFormat fmt,
                   PointerBases& bases) -> Result<CfiSection> {
    auto data = file.relocated_section_data(s);
    if (!data) return std::move(data).error().in_file(file.name());
    bases = bases_for(file, s);
    return parse_cfi_section(*data, fmt, std::string(s.name), bases);
  };
  if (options.eh_frame)
    if (const Section* s = f.find_section(".eh_frame"); s && s->type != SHT_NOBITS) {
      auto r = parse(f, *s, CfiFormat::EhFrame, m.eh_frame_bases);
      if (!r) return std::move(r).error();
      m.eh_frame = std::move(*r);
      if (const Section* h = f.find_section(".eh_frame_hdr"); h && h->type != SHT_NOBITS) {
        auto data = f.section_data(*h);
        if (!data)
          m.eh_frame_hdr_error = std::move(data).error();
        else if (auto hdr = parse_eh_frame_hdr(*data, h->addr); !hdr)
          m.eh_frame_hdr_error = std::move(hdr).error().in_file(f.name());
        else {
          m.eh_frame_hdr = std::move(*hdr);
          m.eh_frame_hdr_problems = verify_eh_frame_hdr(*m.eh_frame_hdr, *m.eh_frame);
        }
      }
    }
  if (options.debug_frame)
    if (const Section* s = f.find_section(".debug_frame"); s && s->type != SHT_NOBITS) {
      auto r = parse(f, *s, CfiFormat::DebugFrame, m.debug_frame_bases);
      if (!r) return std::move(r).error();
      m.debug_frame = std::move(*r);
    }
  // A separate debug file supplies the sections the module lacks.
  const bool want_debug_frame = options.debug_frame && !m.debug_frame;
  const bool want_eh_frame =
      options.eh_frame && options.separate_eh_frame && (!m.eh_frame || m.eh_frame->fdes.empty());
  if (!options.separate_debug_file || !(want_debug_frame || want_eh_frame)) return m;
  std::unique_ptr<ElfFile> dbg = open_debug_file(f, options.debug_dirs);
  if (!dbg) return m;
  auto section = [&](const char* name) {
    const Section* s = dbg->find_section(name);
    return s && s->type != SHT_NOBITS ? s : nullptr;
  };
  bool used = false;
  if (const Section* s = want_debug_frame ? section(".debug_frame") : nullptr) {
    auto r = parse(*dbg, *s, CfiFormat::DebugFrame, m.debug_frame_bases);
    if (!r) return std::move(r).error();
    m.debug_frame = std::move(*r);
    used = true;
  }
  if (const Section* s = want_eh_frame ? section(".eh_frame") : nullptr) {
    auto r = parse(*dbg, *s, CfiFormat::EhFrame, m.eh_frame_bases);
    if (!r) return std::move(r).error();
    m.eh_frame = std::move(*r);
    m.eh_frame_separate = true;
    // The module's own search table, if any, indexed the section replaced.
    m.eh_frame_hdr.reset();
    m.eh_frame_hdr_error.reset();
    m.eh_frame_hdr_problems.clear();
    used = true;
  }
  // The sections and their bases' indirect reader refer to the debug file: it lives with them.
  if (used) m.debug_elf = std::move(dbg);
  return m;
}

Result<UnwindTable> build_unwind_table(const ModuleCfi& module, TableBuildStats* stats) {
  if (auto e = module.first_error()) return *e;
  UnwindTable table;
  TableBuildStats local;
  TableBuildStats& st = stats ? *stats : local;
  bool relocatable = module.elf->type() == ET_REL;
  if (module.eh_frame)
    if (auto s = build_from(*module.eh_frame, module.eh_frame_bases, relocatable, table, st); !s)
      return std::move(s).error().in_file(module.owner(*module.eh_frame).name());
  if (module.debug_frame)
    if (auto s = build_from(*module.debug_frame, module.debug_frame_bases, relocatable, table, st);
        !s)
      return std::move(s).error().in_file(module.owner(*module.debug_frame).name());
  table.finish();
  return table;
}

} // namespace ehelf
