// check::RowCheck: one instruction's unwind row compared with where the execution keeps the
// return address and the callee-saved registers (its innermost shadow frame), and the tally of a
// run's comparisons: each inconsistency once per (module, address, column), the summary's counts.
// The live stepper (validator.cpp) and the replay of a recorded trace (replay.cpp) both judge
// through it, so that both report alike.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <sys/types.h>
#include <tuple>
#include <unordered_set>

#include "check/shadow_stack.hpp"
#include "check/validator.hpp"
#include "model/memory_reader.hpp"
#include "runtime/module_map.hpp"

namespace ehelf::check {

// One instruction to judge: where it is and the row that covers it.
struct Site {
  const Module* module = nullptr;    // its module (path, bias)
  const ModuleData* data = nullptr;  // the tables it is judged against (data->table)
  const TableRange* range = nullptr; // the range holding the pc; null: no row covers it
  uint64_t pc = 0;
  pid_t tid = 0;
};

// What a report says about a site beyond the row: the function holding it ("name+0x1f", or "")
// and the instruction (AT&T).
class SiteNames {
public:
  virtual std::string function(const Site& site) = 0;
  virtual std::string instruction(const Site& site) = 0;

protected:
  ~SiteNames() = default;
};

class RowCheck {
public:
  explicit RowCheck(SiteNames& names) : names_(names) {}

  // Compares the row at `site` (data->table must exist) with `frame` from the registers before
  // the instruction. `memory` serves the reads that rules need. `state_unknown`, when given, is
  // set by the memory reader when a read asked for what its source does not hold (a trace that
  // did not record it); such a failure, or one needing a register `regs` does not know, leaves
  // the instruction undetermined instead of reported (live runs know every register they need).
  void check(const Site& site, const RegisterState& regs, const ShadowFrame& frame,
             MemoryReader& memory, const bool* state_unknown = nullptr);

  // The result being made: the inconsistencies and the checks' counts; the caller adds its own
  // (steps, calls, signals...) to the summary.
  CheckResult& result() { return result_; }
  // The result with the distinct addresses, functions, modules and uncovered functions counted.
  CheckResult finish();

private:
  void report(const Site& site, RowView row, std::string column, std::string expected,
              std::string table);

  SiteNames& names_;
  CheckResult result_;
  std::set<std::tuple<std::string, uint64_t, std::string>> reported_;
  std::unordered_set<uint64_t> checked_pcs_;
  std::set<std::pair<const ModuleData*, uint32_t>> functions_;
  std::set<const ModuleData*> modules_;
  std::set<std::pair<std::string, std::string>> uncovered_;
};

// "CFA=rsp+16 rbx=c-16 ra=c-8": the cells of readelf -wF's row, named.
std::string row_text(RowView row);

// A row whose return address is in a register, or saved at or above the CFA, describes where a
// jump goes rather than a frame entered by a call (a call leaves it below the CFA): glibc's
// __longjmp, setcontext and swapcontext describe their target context this way. Nothing to
// compare it with.
bool describes_jump_target(const RegisterRule* ra);

} // namespace ehelf::check
