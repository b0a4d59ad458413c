// Where an executable's main is when no symbol says so (Debian's programs are stripped of
// .symtab, and main is not exported): the first argument glibc's _start passes to
// __libc_start_main. `ehelf check` starts there by default; the synthesizer names it.
#pragma once

#include <cstdint>
#include <optional>

#include "elf/elf_file.hpp"

namespace ehelf::x86 {

// main's SVMA as the entry point's code passes it to __libc_start_main: the value of rdi
// (`lea main(%rip),%rdi` or `mov $main,%rdi`, as glibc's start.S sets it) at the entry point's
// first call, when that call goes to __libc_start_main (a symbol of that name, its PLT entry, or
// a GOT slot the dynamic relocations bind to it) and the value is in an executable section.
// nullopt otherwise (no entry point, other start-up code, a static binary without symbols).
std::optional<uint64_t> main_from_entry(const ElfFile& elf);

} // namespace ehelf::x86
