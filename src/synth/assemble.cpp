#include "synth/assemble.hpp"

#include <algorithm>
#include <vector>

namespace ehelf::synth {

UnwindTable assemble_table(const SynthResult& result) {
  UnwindTable t;
  std::vector<uint32_t> first_part; // table function index of each function's first part
  for (const SynthFunction& f : result.functions) {
    first_part.push_back(static_cast<uint32_t>(t.function_count()));
    for (const SynthFunction::Part& p : f.parts) {
      FunctionInfo info;
      info.pc_begin = p.begin;
      info.pc_end = p.end;
      if (p.lsda) {
        info.lsda = p.lsda;
        info.personality_slot = result.personality_slot;
        info.personality = result.personality;
      }
      t.add_function(info);
    }
  }
  std::vector<ColumnRule> columns;
  CfaRule cfa;
  ExpressionPool expressions(t);
  // Each row written is its own instruction's: an instruction starting inside one written
  // before and ending past it (two functions' analyses out of step) would have its row cover
  // the instruction that follows (the table keeps the first range at each byte).
  uint64_t written_end = 0;
  for (const AnalysedInstruction& in : result.instructions) {
    if (in.address < written_end && in.address + in.length > written_end) continue;
    written_end = std::max(written_end, in.address + in.length);
    if (state_row(result.state_of(in), result.functions[in.function].outermost, expressions,
                  columns, cfa)) {
      const SynthFunction& f = result.functions[in.function];
      const auto part = static_cast<uint32_t>(&f.part_of(in.address) - f.parts.data());
      t.add_range({in.address, in.address + in.length, t.intern_row(cfa, columns),
                   first_part[in.function] + part, 0});
    }
  }
  t.finish();
  return t;
}

} // namespace ehelf::synth
