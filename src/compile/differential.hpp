// Differential check of a compiled eh_elf against the interpreter: its remote and local variants
// through the backend oracle (model/backend_oracle.hpp: both ends of every range, synthetic
// registers and memory that tell every rule kind apart), summed.
#pragma once

#include <string>
#include <vector>

#include "eh_elf/eh_elf_object.hpp"
#include "model/unwind_table.hpp"

namespace ehelf {

struct DifferentialResult {
  uint64_t checks = 0;                 // (address, variant) pairs evaluated
  uint64_t agreed = 0;                 // both succeeded with identical tracked registers
  uint64_t both_failed = 0;            // both refused (e.g. a read outside the synthetic stack)
  uint64_t fallbacks = 0;              // the eh_elf answered EHELF_NEEDS_INTERPRETER
  std::vector<std::string> mismatches; // the first few disagreements, described
  uint64_t mismatch_count = 0;
  bool ok() const { return mismatch_count == 0; }
};

DifferentialResult check_eh_elf(const UnwindTable& table, const EhElfObject& object);

// "N checks, N agree, N both refuse, N need the interpreter, N mismatches", then the first
// mismatches, each on its own line.
std::string describe(const DifferentialResult& r);

} // namespace ehelf
