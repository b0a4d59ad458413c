#include "x86/program_main.hpp"

#include "elf/dynamic_relocations.hpp"
#include "x86/decoder.hpp"
#include "x86/elf_code.hpp"

namespace ehelf::x86 {

namespace {

constexpr std::string_view kStartMain = "__libc_start_main";
// glibc's _start reaches its call in 12 instructions; a longer walk is other start-up code.
constexpr int kMaxInstructions = 32;

// Whether `call` calls __libc_start_main: directly (a symbol of that name, or its PLT entry) or
// through a GOT slot the dynamic relocations bind to it.
bool calls_start_main(const ElfFile& elf, const Instruction& call) {
  if (call.flow == Flow::call) {
    for (const Symbol& s : elf.symbols()) // any alias there (a static glibc has several)
      if (s.value == call.target && s.name == kStartMain) return true;
    const Symbol* plt = elf.plt_symbol_for(call.target);
    return plt && plt->name.substr(0, plt->name.find('@')) == kStartMain;
  }
  if (call.indirect_slot == 0) return false;
  for (const NamedRelocation& r : dynamic_relocations(elf))
    if (r.offset == call.indirect_slot && r.name == kStartMain) return true;
  return false;
}

} // namespace

std::optional<uint64_t> main_from_entry(const ElfFile& elf) {
  if (elf.entry() == 0) return std::nullopt;
  const Decoder decoder;
  std::optional<uint64_t> rdi; // an address rdi holds, when known
  uint64_t pc = elf.entry();
  for (int i = 0; i < kMaxInstructions; ++i) {
    const std::span<const uint8_t> code = code_from(elf, pc);
    if (code.empty()) return std::nullopt;
    auto insn = decoder.decode(code, pc);
    if (!insn) return std::nullopt;
    if (insn->flow == Flow::call || insn->flow == Flow::call_indirect) {
      if (!rdi || code_from(elf, *rdi).empty() || !calls_start_main(elf, *insn))
        return std::nullopt;
      return rdi;
    }
    if (insn->flow != Flow::next) return std::nullopt;
    if (insn->writes_reg(Reg::rdi)) {
      rdi.reset();
      if (insn->value_register == Reg::rdi && insn->address_value != 0) rdi = insn->address_value;
    }
    pc += insn->length;
  }
  return std::nullopt;
}

} // namespace ehelf::x86
