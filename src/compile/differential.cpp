#include "compile/differential.hpp"

#include <fmt/format.h>

#include "eh_elf/eh_elf_backend.hpp"

namespace ehelf {

DifferentialResult check_eh_elf(const UnwindTable& table, const EhElfObject& object) {
  DifferentialResult result;
  for (bool local : {false, true}) {
    const BackendCheck c = check_backend(table, eh_elf_backend(object, local));
    result.checks += c.checks;
    result.agreed += c.agreed;
    result.both_failed += c.both_failed;
    result.fallbacks += c.not_applicable;
    result.mismatch_count += c.mismatch_count;
    for (const std::string& m : c.mismatches)
      if (result.mismatches.size() < 20) result.mismatches.push_back(c.backend + ": " + m);
  }
  return result;
}

std::string describe(const DifferentialResult& r) {
  std::string out = fmt::format("{} checks, {} agree, {} both refuse, {} need the interpreter, {} "
                                "mismatches",
                                r.checks, r.agreed, r.both_failed, r.fallbacks, r.mismatch_count);
  for (const std::string& m : r.mismatches)
    out += "\n  mismatch: " + m;
  return out;
}

} // namespace ehelf
