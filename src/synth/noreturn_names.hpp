// Functions that never return to their caller, known by name (the C library's, libstdc++'s,
// GNAT's run time's): where no code says so (a call through the PLT to another file), their
// names do. The lists are data, in noreturn_names.cpp.
#pragma once

#include <string_view>

namespace ehelf::synth {

// Whether a function of this name (a symbol, or a PLT slot's relocation; "@VERSION" ignored)
// never returns.
bool known_noreturn(std::string_view name);
// glibc's error() and error_at_line(): they exit when their first argument is not 0 (the
// compiler knows it and puts nothing after such a call).
bool exits_unless_status_zero(std::string_view name);

} // namespace ehelf::synth
