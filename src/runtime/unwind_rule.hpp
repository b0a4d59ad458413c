// UnwindRule: one frame's step as the runtime executes it without the model: a closed set of
// cases, each with its formula below, and one apply(). The compact table stores these rules,
// the rule cache keeps a 16-byte hot form of them (rule_cache.hpp: hot_form), and the
// frame-pointer step is one of them (kFramePointerRule). A model row that no case expresses
// converts to Interpret with the reason (NotExpressible), and the interpreter evaluates the row.
//
// Cases (CFA: the caller's rsp; offsets are bytes; "saved at CFA + o": read from memory there):
//   NoEntry     no FDE covers the address: the step fails (NoTable).
//   CfaRsp      CFA = rsp + cfa_offset
//   CfaRbp      CFA = rbp + cfa_offset
//     then, for both: rip = *(CFA + rip_offset)            (rip == AtCfa)
//                     rip unknown: the outermost frame     (rip == Unknown)
//                     rbp = *(CFA + rbp_offset) | rbp | unknown   (AtCfa | Same | Unknown)
//                     rbx = *(CFA + rbx_offset) | rbx | unknown   (the same)
//                     rsp = CFA
//     A saved rbp or rbx that cannot be read becomes unknown (as in the interpreter and the
//     compiled code): a walk needs only the CFA and the return address.
//   Interpret   evaluate the model row; `interpret_reason()` says why no case above fits.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/memory_reader.hpp"
#include "model/register_state.hpp"
#include "model/registers.hpp"
#include "model/unwind_table.hpp"

namespace ehelf {

// Why a walk stopped (or None while it goes on).
enum class StopReason {
  None,
  EndOfStack,      // the return address is undefined or 0: the outermost frame
  NoModule,        // the pc is in no known module
  NoTable,         // the module has no unwind entry for the pc (and no frame pointer to follow)
  BadRead,         // a memory read was refused
  MissingRegister, // a rule needs a register whose value is unknown
  CfaNotGrowing,   // the caller's stack pointer is not above the callee's: a loop or corruption
  DepthLimit,      // max_depth frames
  RuleFailed,      // the interpreter could not evaluate the row
};
std::string_view stop_reason_name(StopReason r);

// Why a model row has no UnwindRule (the step then runs the interpreter).
enum class NotExpressible : uint8_t {
  None,
  CfaIsExpression,        // DW_CFA_def_cfa_expression (PLT stubs, signal trampolines)
  CfaRegisterNotRspOrRbp, // CFA = r10 + 0 (DRAP realignment), or any other register
  CfaOffsetDoesNotFit,    // beyond 32 bits
  ReturnColumnNotRip,     // the FDE's CIE names another return-address column
  RuleForRsp,             // a rule on rsp itself: the case above always sets rsp = CFA
  ReturnAddressNotSaved,  // rip is same value, in a register or an expression
  RegisterRuleNotOffset,  // rbp or rbx in another register, val_offset or an expression
  OffsetDoesNotFit,       // a save slot beyond 16 bits of the CFA
  TooManyRules,           // the compact table's 16-bit rule numbers are exhausted
};
inline constexpr unsigned kNotExpressibleCount = unsigned(NotExpressible::TooManyRules) + 1;
static_assert(kNotExpressibleCount <= 16, "UnwindRule::why holds a reason in 4 bits");
std::string_view not_expressible_name(NotExpressible why); // "cfa is an expression", ...

struct UnwindRule {
  enum Kind : uint8_t { NoEntry = 0, CfaRsp = 1, CfaRbp = 2, Interpret = 3 };
  // How a register is recovered: kept as is, read at CFA + offset, or unknown.
  enum Save : uint8_t { Same = 0, AtCfa = 1, Unknown = 2 };
  uint8_t kind : 4 = NoEntry;
  uint8_t why : 4 = 0; // Interpret: the NotExpressible reason (interpret_reason())
  uint8_t rip : 2 = Unknown;
  uint8_t rbp : 2 = Same;
  uint8_t rbx : 2 = Same;
  uint8_t signal_frame : 1 = 0;
  uint8_t : 1;
  int16_t rip_offset = 0;
  int32_t cfa_offset = 0;
  int16_t rbp_offset = 0;
  int16_t rbx_offset = 0;
  bool operator==(const UnwindRule&) const = default;

  static UnwindRule interpret(NotExpressible why, bool signal_frame) {
    UnwindRule r;
    r.kind = Interpret;
    r.signal_frame = signal_frame;
    r.why = uint8_t(why);
    return r;
  }
  NotExpressible interpret_reason() const {
    return kind == Interpret ? NotExpressible(why) : NotExpressible::None;
  }
};
static_assert(sizeof(UnwindRule) == 12, "UnwindRule layout is part of the compact table's size");

// Code compiled with frame pointers: CFA = rbp + 16, the return address at CFA - 8, the
// caller's rbp at CFA - 16 (`push %rbp; mov %rsp,%rbp`). For modules without tables.
inline constexpr UnwindRule kFramePointerRule = [] {
  UnwindRule r;
  r.kind = UnwindRule::CfaRbp;
  r.cfa_offset = 16;
  r.rip = UnwindRule::AtCfa;
  r.rip_offset = -8;
  r.rbp = UnwindRule::AtCfa;
  r.rbp_offset = -16;
  r.rbx = UnwindRule::Same;
  return r;
}();

// The rule of one model row (of function `fn`), or Interpret with the reason.
UnwindRule to_unwind_rule(RowView row, const FunctionInfo& fn);

// Applies a CfaRsp or CfaRbp rule: `regs` become the caller's. MissingRegister when the CFA's
// register is unknown, BadRead when the return address cannot be read; `regs` are then
// unchanged. Inline: every table step runs it.
inline __attribute__((always_inline)) StopReason
apply_rule(const UnwindRule& rule, RegisterState& regs, MemoryReader& mem) {
  const unsigned base_reg = rule.kind == UnwindRule::CfaRsp ? x86_64::RSP : x86_64::RBP;
  if (!regs.has(base_reg)) return StopReason::MissingRegister;
  const uint64_t cfa = regs.get(base_reg) + static_cast<uint64_t>(int64_t(rule.cfa_offset));
  uint64_t rip = 0, rbp = regs.get(x86_64::RBP), rbx = regs.get(x86_64::RBX);
  if (rule.rip == UnwindRule::AtCfa &&
      !mem.read_u64(cfa + static_cast<uint64_t>(int64_t(rule.rip_offset)), rip))
    return StopReason::BadRead;
  const bool rbp_read = rule.rbp == UnwindRule::AtCfa &&
                        mem.read_u64(cfa + static_cast<uint64_t>(int64_t(rule.rbp_offset)), rbp);
  const bool rbx_read = rule.rbx == UnwindRule::AtCfa &&
                        mem.read_u64(cfa + static_cast<uint64_t>(int64_t(rule.rbx_offset)), rbx);
  if (rule.rip == UnwindRule::AtCfa)
    regs.set(x86_64::RIP, rip);
  else
    regs.clear(x86_64::RIP);
  if (rbp_read)
    regs.set(x86_64::RBP, rbp);
  else if (rule.rbp != UnwindRule::Same)
    regs.clear(x86_64::RBP);
  if (rbx_read)
    regs.set(x86_64::RBX, rbx);
  else if (rule.rbx != UnwindRule::Same)
    regs.clear(x86_64::RBX);
  regs.set(x86_64::RSP, cfa);
  return StopReason::None;
}

} // namespace ehelf
