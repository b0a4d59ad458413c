// libFuzzer target: arbitrary bytes as an .eh_frame or .debug_frame section (the first byte
// chooses), interpreted into a table, and every fast form of a step held to the model on it by
// the backend oracle, as `ehelf verify` does on real files: the compact table's rules, the rule
// cache's hot form (as the general step applies it, and as the local walk's fast path takes it:
// hot_step), the frame-pointer step, a cursor's remembered row, and the in-kernel walk's BPF rows
// (their user-space twin, the BPF program's own step). A mismatch aborts: whatever rows a hostile
// table holds, no backend may answer differently from the interpreter.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "bpf/bpf_check.hpp"
#include "dwarf/cfa_interpreter.hpp"
#include "dwarf/cfi_section.hpp"
#include "dwarf/fde_function.hpp"
#include "runtime/backend_check.hpp"

namespace {

void require(const ehelf::BackendCheck& c) {
  if (c.ok()) return;
  std::fprintf(stderr, "%s: %llu mismatches, first: %s\n", c.backend.c_str(),
               static_cast<unsigned long long>(c.mismatch_count),
               c.mismatches.empty() ? "" : c.mismatches.front().c_str());
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // (Each check runs every backend at three states per range: small sections keep a run short.)
  if (size < 1 || size > 4096) return 0;
  const auto format = (data[0] & 1) ? ehelf::CfiFormat::DebugFrame : ehelf::CfiFormat::EhFrame;
  const std::span<const uint8_t> bytes(data + 1, size - 1);
  ehelf::PointerBases bases;
  bases.section_addr = 0x2000;
  const ehelf::CfiSection s = ehelf::parse_cfi_section(bytes, format, ".eh_frame", bases);
  ehelf::UnwindTable table;
  ehelf::CfaInterpreter interp(table);
  // As the module loader builds a table (dwarf/module_cfi.cpp), its functions the same
  // (function_of), but every FDE's rows kept up to where its program failed, where the loader
  // refuses the section: more hostile tables for the backends.
  for (const ehelf::Fde& f : s.fdes) {
    if (f.pc_range == 0 || f.pc_begin == 0) continue;
    const uint32_t function = table.add_function(ehelf::function_of(s, f));
    (void)interp.run(s, s.cies[f.cie], f, bases, [&](const ehelf::InterpretedRow& r) {
      const uint32_t row = table.intern_row(r.state->cfa, r.state->columns);
      table.add_range(ehelf::TableRange{r.begin, r.end, row, function, r.state->args_size});
    });
  }
  table.finish();
  // (Overlapping FDEs leave ranges that are not disjoint: the runtime's forms take such tables
  // too, the BPF rows refuse them with an error.)
  for (const ehelf::BackendCheck& c : ehelf::check_runtime_backends(table))
    require(c);
  if (ehelf::encode_bpf_rows(table)) require(ehelf::check_bpf_rows(table));
  return 0;
}
