#include "runtime/symbolize.hpp"

#include <cstdlib>
#include <cxxabi.h>
#include <memory>

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

namespace {

// Where the parameter list of a demangled function name starts (npos: none): the first '(' outside
// template arguments that is not "(anonymous namespace)" or part of an operator's name.
size_t parameters_start(std::string_view d) {
  int angle = 0, paren = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d.compare(i, 21, "(anonymous namespace)") == 0) {
      i += 20;
      continue;
    }
    if (d.compare(i, 8, "operator") == 0) { // operator<, operator(), operator->*, ...
      size_t j = i + 8;
      if (d.compare(j, 2, "()") == 0)
        j += 2;
      else
        while (j < d.size() && j < i + 11 &&
               std::string_view("<>=!+-*/%^&|~[],").find(d[j]) != std::string_view::npos)
          ++j;
      i = j - 1;
      continue;
    }
    switch (d[i]) {
    case '<':
      ++angle;
      break;
    case '>':
      angle -= angle > 0;
      break;
    case '(':
      if (angle == 0 && paren == 0) return i;
      ++paren;
      break;
    case ')':
      paren -= paren > 0;
      break;
    default:
      break;
    }
  }
  return std::string_view::npos;
}

} // namespace

std::string demangle(std::string_view name, bool with_parameters) {
  std::string s(name);
  if (s.size() < 2 || s[0] != '_' || s[1] != 'Z') return s;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !d) return s;
  std::string full(d.get());
  if (with_parameters) return full;
  const size_t params = parameters_start(full);
  if (params == std::string::npos) return full;
  std::string out = full.substr(0, params);
  if (size_t clone = full.rfind(" [clone "); clone != std::string::npos && clone > params)
    out += full.substr(clone);
  return out;
}

} // namespace ehelf
