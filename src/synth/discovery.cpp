#include "synth/discovery.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "elf/dynamic_relocations.hpp"
#include "elf/plt_entries.hpp"
#include "synth/noreturn_names.hpp"
#include "x86/program_main.hpp"

namespace ehelf::synth {

const CodeSection* Discovery::section_of(uint64_t a) const {
  for (const CodeSection& c : code)
    if (a >= c.begin && a < c.end) return &c;
  return nullptr;
}

void Discovery::add_start(uint64_t a, std::string name) {
  if (!section_of(a)) return;
  auto [it, fresh] = names.try_emplace(a, std::move(name));
  if (fresh && it->second.empty()) it->second = fmt::format("fn_{:x}", a);
}

uint64_t Discovery::extent_end(uint64_t start) const {
  const CodeSection* c = section_of(start);
  uint64_t end = c ? c->end : start;
  if (auto n = names.upper_bound(start); n != names.end()) end = std::min(end, n->first);
  if (auto k = known_ends.find(start); k != known_ends.end() && k->second > start)
    end = std::min(end, k->second);
  return end;
}

uint64_t Discovery::stated_end(uint64_t a) const {
  if (auto k = known_ends.find(a); k != known_ends.end()) return k->second;
  if (shipped)
    if (const TableRange* r = shipped->find(a))
      if (const FunctionInfo& f = shipped->function(r->function); f.pc_begin == a) return f.pc_end;
  return a;
}

uint64_t Discovery::known_function_holding(uint64_t a) const {
  if (auto it = known_ends.upper_bound(a); it != known_ends.begin())
    if (--it; it->first < a && a < it->second) return it->first;
  if (shipped)
    if (const TableRange* r = shipped->find(a))
      if (const uint64_t begin = shipped->function(r->function).pc_begin; begin < a) return begin;
  return 0;
}

uint64_t Discovery::cold_part_of(uint64_t a) const {
  auto it = cold.upper_bound(a);
  if (it == cold.begin()) return 0;
  --it;
  return a < extent_end(*it) ? *it : 0;
}

namespace {

// PLT stubs of noreturn functions: each PLT entry (elf/plt_entries) jumps through a GOT slot,
// and the dynamic relocations name the symbol each slot is bound to.
void discover_plt_noreturn(const ElfFile& elf, Discovery& d) {
  std::unordered_map<uint64_t, std::string_view> slot_names;
  for (const NamedRelocation& r : dynamic_relocations(elf))
    slot_names[r.offset] = r.name;
  std::unordered_map<std::string_view, uint64_t> defined; // functions this file defines
  for (const Symbol& sym : elf.symbols())
    if (sym.type == STT_FUNC && d.section_of(sym.value)) defined.emplace(sym.name, sym.value);
  for (const PltEntry& e : plt_entries(elf)) {
    auto n = slot_names.find(e.slot);
    if (n == slot_names.end()) continue;
    if (known_noreturn(n->second)) d.noreturn.insert(e.address);
    if (exits_unless_status_zero(n->second)) d.exit_if_status.insert(e.address);
    if (auto def = defined.find(n->second); def != defined.end()) {
      d.plt_to_local[def->second].push_back(e.address);
      d.plt_local_entries.insert(e.address);
    }
  }
}

} // namespace

Discovery discover(const ElfFile& elf, const UnwindTable* shipped) {
  Discovery d;
  d.shipped = shipped;
  for (const Section& s : elf.sections()) {
    if (!(s.flags & SHF_EXECINSTR) || s.type == SHT_NOBITS || s.name.starts_with(".plt")) continue;
    auto data = elf.section_data(s);
    if (!data) continue;
    d.code.push_back({s.addr, s.addr + data->size(), *data});
    d.text_bytes += data->size();
  }
  for (const Symbol& sym : elf.symbols()) {
    if (sym.type != STT_FUNC || !d.section_of(sym.value)) continue;
    std::string name(sym.name);
    if (name.find(".cold") != std::string::npos) d.cold.insert(sym.value);
    if (known_noreturn(name)) d.noreturn.insert(sym.value);
    if (exits_unless_status_zero(name)) d.exit_if_status.insert(sym.value);
    d.add_start(sym.value, name);
    if (sym.size) d.known_ends[sym.value] = std::max(d.known_ends[sym.value], sym.value + sym.size);
  }
  discover_plt_noreturn(elf, d);
  if (auto main = x86::main_from_entry(elf)) d.add_start(*main, "main"); // stripped programs
  for (const Section& s : elf.sections())
    if (s.type == SHT_INIT_ARRAY || s.type == SHT_FINI_ARRAY || s.type == SHT_PREINIT_ARRAY)
      if (auto data = elf.section_data(s))
        for (size_t i = 0; i + 8 <= data->size(); i += 8) {
          uint64_t a;
          std::memcpy(&a, data->data() + i, 8);
          d.add_start(a, ""); // constructors and destructors (when not left to relocations)
        }
  for (uint64_t a : relative_relocation_addends(elf))
    if (d.section_of(a)) {
      d.address_taken.insert(a);
      d.code_pointers.insert(a);
    }
  if (shipped)
    for (size_t i = 0; i < shipped->function_count(); ++i)
      if (shipped->function(i).pc_end > shipped->function(i).pc_begin)
        if (!d.names.count(shipped->function(i).pc_begin) &&
            d.section_of(shipped->function(i).pc_begin)) {
          d.add_start(shipped->function(i).pc_begin, "");
          d.weak.insert(shipped->function(i).pc_begin);
        }
  d.add_start(elf.entry(), "_start");
  d.executable_not_pie = elf.type() == ET_EXEC;
  d.weak.erase(elf.entry());
  d.entry = elf.entry();
  // A fixed-address executable stores code addresses in its data as they are, without
  // relocations: the aligned words there that fall in the code are labels computed jumps
  // may go to (never starts by themselves: any constant could look like one).
  if (d.executable_not_pie) {
    for (const Section& s : elf.sections())
      if ((s.flags & SHF_ALLOC) && !(s.flags & SHF_EXECINSTR) && s.type == SHT_PROGBITS)
        if (auto data = elf.section_data(s))
          for (size_t i = (8 - s.addr % 8) % 8; i + 8 <= data->size(); i += 8) {
            uint64_t a;
            std::memcpy(&a, data->data() + i, 8);
            if (d.section_of(a)) d.code_pointers.insert(a);
          }
  }
  return d;
}

} // namespace ehelf::synth
