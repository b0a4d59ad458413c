// Checking an eh_elf's bytes before any of its code can run: only what ehelf's compiler makes.
//
// Design: an eh_elf is loaded with dlopen, which runs code (constructors, IFUNC resolvers) and
// may load other objects before the caller can look at the result. So the file is read and
// checked first, and only the checked file is loaded (see EhElfObject::load_fd). The check is
// structural (a digest recorded at compile time would trust whoever can write the manifest as
// much as whoever can write the object), and it mirrors what the dynamic loader reads: program
// headers and the dynamic section, with addresses translated through PT_LOAD segments exactly as
// the loader maps them. What ehelf's compiler produces (gcc or clang, with ld.bfd) is:
//   - an x86_64 ET_DYN with PT_LOAD, PT_DYNAMIC, PT_NOTE, PT_GNU_EH_FRAME, PT_GNU_STACK (not
//     executable) and PT_GNU_RELRO program headers; no segment both writable and executable;
//   - dynamic tags GNU_HASH (or HASH), STRTAB, SYMTAB, STRSZ, SYMENT, RELA, RELASZ, RELAENT,
//     RELACOUNT, and at most the BIND_NOW/NOW flags: no NEEDED, INIT, FINI, *_ARRAY, TEXTREL,
//     JMPREL, AUDIT, FILTER, RPATH...;
//   - only R_X86_64_RELATIVE relocations, each into a writable segment (no symbol is ever
//     resolved, so nothing can bind to or interpose libc, and no IFUNC resolver runs);
//   - exactly the three exported symbols of include/ehelf/eh_elf.h, defined here;
//   - sections among those of a compiled object (no .init_array, .ctors, .tdata, .interp...).
#pragma once

#include <cstdint>
#include <span>

#include "support/result.hpp"

namespace ehelf {

// Ok if `image` (a whole file) has only the structure above; else why not, in one line (the
// caller adds the file name).
Status check_eh_elf_image(std::span<const uint8_t> image);

} // namespace ehelf
