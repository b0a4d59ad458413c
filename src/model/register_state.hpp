// RegisterState: values of the x86_64 general registers (DWARF 0-16) with a validity bit each.
#pragma once

#include <array>
#include <cstdint>

#include "model/registers.hpp"

namespace ehelf {

struct RegisterState {
  std::array<uint64_t, x86_64::kGeneralRegs> value{};
  uint32_t valid = 0; // bit r set: value[r] is known

  bool has(unsigned r) const { return r < x86_64::kGeneralRegs && (valid >> r) & 1u; }
  uint64_t get(unsigned r) const { return value[r]; }
  void set(unsigned r, uint64_t v) {
    value[r] = v;
    valid |= 1u << r;
  }
  void clear(unsigned r) { valid &= ~(1u << r); }
  bool operator==(const RegisterState&) const = default;
};

// Where registers' values are in memory (libunwind's unw_get_save_loc): bit r of `valid` set
// when register r's value is the word at address[r] (a save slot on the stack, a signal
// context, the unw_context_t a walk started from).
struct SaveSlots {
  std::array<uint64_t, x86_64::kGeneralRegs> address{};
  uint32_t valid = 0;

  bool has(unsigned r) const { return r < x86_64::kGeneralRegs && (valid >> r) & 1u; }
  void set(unsigned r, uint64_t a) {
    address[r] = a;
    valid |= 1u << r;
  }
  void clear(unsigned r) { valid &= ~(1u << r); }
};

} // namespace ehelf
