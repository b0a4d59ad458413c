#include "synth/noreturn_names.hpp"

#include <algorithm>
#include <array>

namespace ehelf::synth {

namespace {

constexpr auto kNoreturn = std::to_array<std::string_view>(
    {"_Exit", "_Unwind_Resume", "_ZSt9terminatev", "__assert_fail", "__assert_perror_fail",
     "__chk_fail", "__cxa_bad_cast", "__cxa_bad_typeid", "__cxa_call_terminate", "__cxa_rethrow",
     "__cxa_throw", "__fortify_fail", "__libc_fatal", "__libc_start_main", "__longjmp_chk",
     "__malloc_assert", "__stack_chk_fail", "_exit", "abort", "err", "errx", "exit", "longjmp",
     "pthread_exit", "quick_exit", "siglongjmp", "verr", "verrx",
     // GNAT's run time: raising an exception
     "__gnat_last_chance_handler", "__gnat_raise_exception", "__gnat_reraise_zcx",
     "ada__exceptions__raise_exception", "ada__exceptions__raise_exception_always",
     "ada__exceptions__reraise_occurrence_always", "system__assertions__raise_assert_failure"});
// Names holding one of these: libstdc++'s std::__throw_* helpers.
constexpr auto kNoreturnInfixes = std::to_array<std::string_view>({"__throw_"});
// Names starting with one of these: GNAT's failed checks, which raise.
constexpr auto kNoreturnPrefixes = std::to_array<std::string_view>({"__gnat_rcheck_"});

constexpr auto kExitUnlessStatusZero = std::to_array<std::string_view>({"error", "error_at_line"});

} // namespace

bool known_noreturn(std::string_view name) {
  if (auto at = name.find('@'); at != std::string_view::npos) name = name.substr(0, at);
  return std::find(kNoreturn.begin(), kNoreturn.end(), name) != kNoreturn.end() ||
         std::any_of(kNoreturnInfixes.begin(), kNoreturnInfixes.end(),
                     [&](std::string_view s) { return name.find(s) != std::string_view::npos; }) ||
         std::any_of(kNoreturnPrefixes.begin(), kNoreturnPrefixes.end(),
                     [&](std::string_view s) { return name.starts_with(s); });
}

bool exits_unless_status_zero(std::string_view name) {
  return std::find(kExitUnlessStatusZero.begin(), kExitUnlessStatusZero.end(), name) !=
         kExitUnlessStatusZero.end();
}

} // namespace ehelf::synth
