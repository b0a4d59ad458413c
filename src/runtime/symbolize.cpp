#include "runtime/symbolize.hpp"

#include <elf.h>
#include <fmt/format.h>

namespace ehelf {

SymbolName symbolize(ModuleMap& map, const Module& m, uint64_t pc) {
  const ModuleData& data = map.load(m);
  if (!data.elf) return {};
  const Symbol* s = data.elf->symbol_for(pc - m.bias);
  if (!s) return {};
  return SymbolName{s->name, pc - m.bias - s->value};
}

SymbolName Symbolizer::name(ModuleMap& map, const Module& m, uint64_t pc) {
  const ModuleData& data = map.load(m);
  if (const ElfFile* dbg = debug_file(m, data)) {
    if (const Symbol* s = dbg->symbol_for(pc - m.bias))
      return SymbolName{s->name, pc - m.bias - s->value};
  }
  return symbolize(map, m, pc);
}

namespace {

bool has_symtab(const ElfFile& elf) {
  for (const Section& s : elf.sections())
    if (s.type == SHT_SYMTAB) return true;
  return false;
}

} // namespace

const ElfFile* Symbolizer::debug_file(const Module& m, const ModuleData& data) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = debug_.try_emplace(&data);
  if (fresh) {
    it->second.module = m.data;
    if (data.elf && !has_symtab(*data.elf))
      if (std::string path = data.elf->find_debug_file(); !path.empty())
        if (auto dbg = ElfFile::open(path)) {
          (void)(*dbg)->symbols(); // built lazily: now, under the lock, so later lookups only read
          it->second.elf = std::move(*dbg);
        }
  }
  return it->second.elf.get();
}

std::string format_symbol(const SymbolName& s) {
  if (s.name.empty()) return {};
  if (s.offset == 0) return std::string(s.name);
  return fmt::format("{}+{:#x}", s.name, s.offset);
}

} // namespace ehelf
