// Naming code addresses: the ELF symbol containing a pc, for frames of a walk.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "elf/elf_file.hpp"
#include "runtime/module_map.hpp"

namespace ehelf {

struct SymbolName {
  std::string_view name; // empty if unknown; points into an ELF file the map or Symbolizer keeps
  uint64_t offset = 0;   // pc - symbol start
};

// The symbol containing `pc` (an actual address) in module `m`, from the module's own symbol
// table (.symtab, else .dynsym), loading the module's data if it is not loaded yet.
SymbolName symbolize(ModuleMap& map, const Module& m, uint64_t pc);

// Names code addresses the way libdwfl does for eu-stack: from the module's .symtab, else from
// its separate debug file's .symtab (a stripped library, e.g. libc with libc6-dbg installed:
// its static functions are in no .dynsym), else from its .dynsym. Used by `ehelf stack` and the
// C API's unw_get_proc_name, so that both give the same names.
//
// Thread-safe: the debug files, opened on first use per module, are kept under a mutex, and
// read only once open (names() may be called from several threads at once, as the C API is;
// loading module data through the map is the caller's concern). Not async-signal-safe.
class Symbolizer {
public:
  // `aliases`: which of several symbols at one address names it (Perf for `ehelf perf`).
  explicit Symbolizer(AliasChoice aliases = AliasChoice::Libdwfl) : aliases_(aliases) {}
  SymbolName name(ModuleMap& map, const Module& m, uint64_t pc);

private:
  struct Files {
    std::shared_ptr<const ModuleData> module; // keeps the key's object alive (no reuse of it)
    std::unique_ptr<ElfFile> own;   // the module's file when its data holds none (in memory)
    std::unique_ptr<ElfFile> debug; // its separate debug file, when it has no .symtab
  };
  // The files that name a module's addresses, opened on first use.
  const Files& files(const Module& m, const ModuleData& data);

  AliasChoice aliases_;
  std::mutex mutex_;
  std::map<const ModuleData*, Files> files_;
};

// "name+0x1f", or "" when unknown.
std::string format_symbol(const SymbolName& s);

// A C++ symbol's demangled name (the name itself when it is not a mangled one). Without
// parameters, as perf prints names (function_name_only): "ns::f(int) const [clone .part.0]" ->
// "ns::f".
std::string demangle(std::string_view name, bool with_parameters = true);

} // namespace ehelf
