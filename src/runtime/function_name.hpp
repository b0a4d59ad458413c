// A demangled C++ name as perf prints it: the entity's name alone, without the return type a
// template function's name starts with, the parameter list, the qualifiers after it and the
// "[clone .cold]" suffixes (what libiberty's demangler prints without DMGL_PARAMS, as
// `c++filt -p` does: "void ns::f<int>(int) const [clone .cold]" -> "ns::f<int>").
#pragma once

#include <string_view>

namespace ehelf {

// `demangled`: what __cxa_demangle printed for a function or data symbol. The result is a part
// of it: lambdas, local classes and local statics keep the enclosing function's parameters
// ("A::f(int) const::{lambda()#1}::operator()"), as do thunks ("non-virtual thunk to A::f()").
std::string_view function_name_only(std::string_view demangled);

} // namespace ehelf
