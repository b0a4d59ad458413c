// libFuzzer target: arbitrary bytes as an .eh_frame section, looked up through RowLookup (rows
// found on demand) with a search table built for the FDEs the whole-section parser finds, and
// also given as the raw header (the input's first byte chooses). Every lookup must stay inside
// the given bytes and terminate; where the whole-table path (CfaInterpreter into an UnwindTable)
// has a row for the same FDE and address, the two must agree (registers 0-16).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "dwarf/cfa_interpreter.hpp"
#include "dwarf/cfi_section.hpp"
#include "dwarf/row_lookup.hpp"

namespace {

constexpr uint64_t kHdrAddr = 0x1000, kFrameAddr = 0x2000;

void put32(std::vector<uint8_t>& v, int32_t x) {
  uint8_t b[4];
  std::memcpy(b, &x, 4);
  v.insert(v.end(), b, b + 4);
}

bool same(const ehelf::UnwindTable& t, ehelf::RowView want, const ehelf::FoundRow& got) {
  if (want.cfa.kind != got.cfa.kind || want.cfa.reg != got.cfa.reg ||
      want.cfa.offset != got.cfa.offset)
    return false;
  unsigned i = 0;
  for (const ehelf::ColumnRule& c : want.columns) {
    if (c.column >= ehelf::FoundRow::kColumns) continue;
    if (i == got.count) return false;
    const ehelf::ColumnRule& g = got.columns[i++];
    if (c.column != g.column || c.rule.kind != g.rule.kind || c.rule.reg != g.rule.reg ||
        c.rule.offset != g.rule.offset)
      return false;
    if (c.rule.expr != ehelf::kNoExpression) {
      const auto& a = t.expression(c.rule.expr).bytes();
      auto b = got.expressions[g.rule.expr];
      if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) return false;
    }
  }
  return i == got.count;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool raw_header = data[0] & 1;
  std::span<const uint8_t> frame(data + 1, size - 1);

  ehelf::PointerBases bases;
  bases.section_addr = kFrameAddr;
  ehelf::CfiSection s =
      ehelf::parse_cfi_section(frame, ehelf::CfiFormat::EhFrame, ".eh_frame", bases);
  // The header: version 1, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4.
  std::vector<uint8_t> hdr = {1, 0x1b, 0x03, 0x3b};
  put32(hdr, static_cast<int32_t>(kFrameAddr - (kHdrAddr + 4)));
  std::vector<std::pair<int64_t, int64_t>> entries;
  for (const ehelf::Fde& f : s.fdes) {
    const int64_t loc = static_cast<int64_t>(f.pc_begin - kHdrAddr);
    if (loc < INT32_MIN || loc > INT32_MAX) continue;
    entries.emplace_back(loc, static_cast<int64_t>(kFrameAddr + f.offset - kHdrAddr));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](auto& a, auto& b) { return a.first < b.first; });
  put32(hdr, static_cast<int32_t>(entries.size()));
  for (auto [loc, fde] : entries) {
    put32(hdr, static_cast<int32_t>(loc));
    put32(hdr, static_cast<int32_t>(fde));
  }
  if (raw_header) { // the input's own bytes as the header (its first half), the rest as frame
    const size_t half = frame.size() / 2;
    hdr.assign(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(half));
    frame = frame.subspan(half);
  }
  ehelf::RowLookup lookup;
  if (!lookup.init(ehelf::CfiImage{hdr, kHdrAddr, frame, kFrameAddr})) return 0;

  ehelf::UnwindTable table;
  if (!raw_header) {
    ehelf::CfaInterpreter interp(table);
    for (const ehelf::Fde& f : s.fdes) {
      ehelf::FunctionInfo fn;
      fn.pc_begin = f.pc_begin;
      fn.pc_end = f.pc_end();
      fn.fde_offset = f.offset;
      const uint32_t function = table.add_function(fn);
      // A failing FDE keeps the rows before its error, as a lookup stopping earlier sees them.
      auto st = interp.run(s, s.cies[f.cie], f, bases, [&](const ehelf::InterpretedRow& r) {
        uint32_t row = table.intern_row(r.state->cfa, r.state->columns);
        table.add_range(ehelf::TableRange{r.begin, r.end, row, function, r.state->args_size});
      });
      (void)st;
    }
    table.finish();
  }
  // Lookups at every FDE's first, middle and last address, and a few around them.
  size_t n = 0;
  for (const ehelf::Fde& f : s.fdes) {
    if (++n > 64) break;
    for (uint64_t pc :
         {f.pc_begin, f.pc_begin + f.pc_range / 2, f.pc_end() - 1, f.pc_end(), f.pc_begin - 1}) {
      ehelf::FoundRow got;
      if (lookup.find(pc, got) != ehelf::RowStatus::Found) continue;
      if (got.begin > pc || pc >= got.end) std::abort();
      const ehelf::TableRange* r = table.find(pc);
      if (!r || table.function(r->function).fde_offset != got.function.fde_offset) continue;
      if (!same(table, table.row(r->row), got)) {
        const ehelf::RowView w = table.row(r->row);
        std::fprintf(stderr,
                     "pc %#llx: table cfa kind %d r%u%+lld, %zu columns; lookup cfa kind %d "
                     "r%u%+lld, %u columns\n",
                     (unsigned long long)pc, int(w.cfa.kind), unsigned(w.cfa.reg),
                     (long long)w.cfa.offset, w.columns.size(), int(got.cfa.kind),
                     unsigned(got.cfa.reg), (long long)got.cfa.offset, got.count);
        for (const ehelf::ColumnRule& c : w.columns)
          std::fprintf(stderr, "  table r%u kind %d reg %u off %lld\n", unsigned(c.column),
                       int(c.rule.kind), unsigned(c.rule.reg), (long long)c.rule.offset);
        for (unsigned i = 0; i < got.count; ++i)
          std::fprintf(stderr, "  lookup r%u kind %d reg %u off %lld\n",
                       unsigned(got.columns[i].column), int(got.columns[i].rule.kind),
                       unsigned(got.columns[i].rule.reg), (long long)got.columns[i].rule.offset);
        std::abort();
      }
    }
  }
  return 0;
}
