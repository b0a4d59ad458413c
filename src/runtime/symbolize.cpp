#include "runtime/symbolize.hpp"

#include "runtime/function_name.hpp"

#include <cstdlib>
#include <cxxabi.h>
#include <memory>

#include <elf.h>
#include <fmt/format.h>
#include <sys/auxv.h>

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
  const Files& f = files(m, data);
  // perf names PLT entries after their relocations' symbols ("memmove@plt").
  if (aliases_ == AliasChoice::Perf)
    if (const ElfFile* elf = data.elf ? data.elf.get() : f.own.get())
      if (const Symbol* s = elf->plt_symbol_for(pc - m.bias))
        return SymbolName{s->name, pc - m.bias - s->value};
  for (const ElfFile* elf : {f.debug.get(), data.elf ? data.elf.get() : f.own.get()})
    if (elf)
      if (const Symbol* s = elf->symbol_for(pc - m.bias, aliases_))
        return SymbolName{s->name, pc - m.bias - s->value};
  return {};
}

namespace {

bool has_symtab(const ElfFile& elf) {
  for (const Section& s : elf.sections())
    if (s.type == SHT_SYMTAB) return true;
  return false;
}

} // namespace

const Symbolizer::Files& Symbolizer::files(const Module& m, const ModuleData& data) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = files_.try_emplace(&data);
  Files& f = it->second;
  if (!fresh) return f;
  f.module = m.data;
  const ElfFile* elf = data.elf.get();
  // Data found in memory (this process's modules): the module's own file, or this process's
  // vDSO image.
  const bool own_vdso = m.vdso && m.image_addr == ::getauxval(AT_SYSINFO_EHDR);
  if (!elf && (own_vdso || !m.vdso)) {
    auto own =
        own_vdso ? ElfFile::parse(std::span<const uint8_t>(
                                      reinterpret_cast<const uint8_t*>(m.image_addr), m.image_size),
                                  "[vdso]")
                 : ElfFile::open(m.path);
    if (own) f.own = std::move(*own);
    elf = f.own.get();
  }
  if (elf) (void)elf->symbols(); // built lazily: now, under the lock, so later lookups only read
  if (elf && !has_symtab(*elf))
    if (std::string path = elf->find_debug_file(); !path.empty())
      if (auto dbg = ElfFile::open(path)) {
        (void)(*dbg)->symbols();
        f.debug = std::move(*dbg);
      }
  return f;
}

std::string format_symbol(const SymbolName& s) {
  if (s.name.empty()) return {};
  if (s.offset == 0) return std::string(s.name);
  return fmt::format("{}+{:#x}", s.name, s.offset);
}

std::string demangle(std::string_view name, bool with_parameters) {
  std::string s(name);
  if (s.size() < 2 || s[0] != '_' || s[1] != 'Z') return s;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !d) return s;
  if (with_parameters) return std::string(d.get());
  return std::string(function_name_only(d.get()));
}

} // namespace ehelf
