#include "runtime/symbolize.hpp"

#include <fmt/format.h>

namespace ehelf {

SymbolName symbolize(ModuleMap& map, const Module& m, uint64_t pc) {
  const ModuleData& data = map.load(m);
  if (!data.elf) return {};
  const Symbol* s = data.elf->symbol_for(pc - m.bias);
  if (!s) return {};
  return SymbolName{s->name, pc - m.bias - s->value};
}

std::string format_symbol(const SymbolName& s) {
  if (s.name.empty()) return {};
  if (s.offset == 0) return std::string(s.name);
  return fmt::format("{}+{:#x}", s.name, s.offset);
}

} // namespace ehelf
