// FrameAddress: what a walk's first pc is, which decides the row it is looked up by. A return
// address is the instruction after a call, which may be the first of another function (a call
// to a noreturn function ends its caller's code) or of a landing pad: its frame's row is the
// call's, at pc - 1. An interrupted instruction (a perf sample's, ptrace's, a signal context's)
// is looked up as it is. Every walk says which its first pc is (no default: the two were mixed).
#pragma once

#include <cstdint>

namespace ehelf {

enum class FrameAddress : uint8_t {
  ReturnAddress, // a return address (a local capture's caller, a frame above another): pc - 1
  Exact,         // an interrupted instruction (a sample, ptrace, a signal context): pc itself
};

inline constexpr bool is_exact(FrameAddress a) {
  return a == FrameAddress::Exact;
}

} // namespace ehelf
