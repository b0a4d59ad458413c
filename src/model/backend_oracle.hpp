// check_backend: the one oracle every unwinding backend is held to. A backend (the compact
// table, the rule cache's hot form, the frame-pointer step, a compiled eh_elf, locally or
// remotely) is a step function; at the first and last address of every range of a table it runs
// on synthetic registers and memory, and UnwindTable::evaluate (the model's definition of a
// step) runs on the same state. Both must agree on every register the backend recovers (value
// and validity), on the signal-frame flag, and on failing; a failing step leaves the registers
// as they were.
//
// The synthetic state distinguishes every rule kind: the general registers hold distinct values
// (so "same value", "register" and an offset rule give different answers), rsp and rbp point into
// a stack whose every word holds a hash of its address (so each read has its own answer and a
// read at the wrong slot shows), and val_offset differs from offset by that read.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/unwind_table.hpp"

namespace ehelf {

// The synthetic memory's word at `addr` (a hash of the address).
uint64_t synthetic_word(uint64_t addr);

// A real buffer holding synthetic_word() of its own addresses, for backends that read memory
// directly (a compiled eh_elf's local variant): reads inside it agree with the unbounded view.
class SyntheticStack final : public MemoryReader {
public:
  explicit SyntheticStack(size_t words);
  uint64_t lo() const { return reinterpret_cast<uint64_t>(words_.data()); }
  uint64_t hi() const { return lo() + 8 * words_.size(); }
  // Bounded: only the buffer is readable (as a local unwinder sees a thread's stack).
  bool read(uint64_t addr, void* out, size_t size) override;

private:
  std::vector<uint64_t> words_;
};

// Every address readable, each word synthetic_word(its address).
class SyntheticMemory final : public MemoryReader {
public:
  bool read(uint64_t addr, void* out, size_t size) override;
};

enum class BackendAnswer {
  Unwound,       // `regs` now hold the caller's registers
  Failed,        // the backend refused (bad read, missing register...)
  NotApplicable, // the backend does not handle this row (it hands it to the interpreter)
};

struct BackendUnderTest {
  std::string name;
  // DWARF registers the backend recovers (bit per register): compared with the model's.
  uint32_t registers = 0;
  // true: the step reads memory only inside the stack it is given (a local unwinder); the
  // oracle then also runs it near the top of the stack, where reads above fail on both sides.
  bool local = false;
  // One step at `pc` (its range is `range`) from the callee's `regs`; `signal_frame` out.
  std::function<BackendAnswer(uint64_t pc, const TableRange& range, RegisterState& regs,
                              MemoryReader& mem, const SyntheticStack& stack, bool& signal_frame)>
      step;
};

struct BackendCheck {
  std::string backend;
  uint64_t checks = 0;         // (address, state) pairs evaluated
  uint64_t agreed = 0;         // both unwound with identical registers
  uint64_t both_failed = 0;    // both refused (a read outside the stack, ...)
  uint64_t not_applicable = 0; // the backend handed the row to the interpreter
  uint64_t mismatch_count = 0;
  std::vector<std::string> mismatches; // the first few, described
  bool ok() const { return mismatch_count == 0; }
};

BackendCheck check_backend(const UnwindTable& table, const BackendUnderTest& backend);

// The registers of the minimal eh_elf set and the compact rule: rip, rsp, rbp, rbx.
inline constexpr uint32_t kWalkRegisters = (1u << 16) | (1u << 7) | (1u << 6) | (1u << 3);

} // namespace ehelf
