// Naming code addresses: the ELF symbol containing a pc, for frames of a walk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/module_map.hpp"

namespace ehelf {

struct SymbolName {
  std::string_view name; // empty if unknown; points into the module's ELF (lives with the map)
  uint64_t offset = 0;   // pc - symbol start
};

// The symbol containing `pc` (an actual address) in module `m`, loading the module's data if it
// is not loaded yet.
SymbolName symbolize(ModuleMap& map, const Module& m, uint64_t pc);

// "name+0x1f", or "" when unknown.
std::string format_symbol(const SymbolName& s);

} // namespace ehelf
