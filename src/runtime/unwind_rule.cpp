#include "runtime/unwind_rule.hpp"

#include "model/registers.hpp"

namespace ehelf {

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
  case StopReason::None:
    return "none";
  case StopReason::EndOfStack:
    return "end of stack";
  case StopReason::NoModule:
    return "pc in no known module";
  case StopReason::NoTable:
    return "no unwind entry for the pc";
  case StopReason::BadRead:
    return "memory read refused";
  case StopReason::MissingRegister:
    return "a needed register is unknown";
  case StopReason::CfaNotGrowing:
    return "stack pointer did not grow";
  case StopReason::DepthLimit:
    return "depth limit";
  case StopReason::RuleFailed:
    return "unwind rule failed";
  }
  return "?";
}

std::string_view not_expressible_name(NotExpressible why) {
  switch (why) {
  case NotExpressible::None:
    return "none";
  case NotExpressible::CfaIsExpression:
    return "cfa is an expression";
  case NotExpressible::CfaRegisterNotRspOrRbp:
    return "cfa register is not rsp or rbp";
  case NotExpressible::CfaOffsetDoesNotFit:
    return "cfa offset does not fit";
  case NotExpressible::ReturnColumnNotRip:
    return "return column is not rip";
  case NotExpressible::RuleForRsp:
    return "rule for rsp";
  case NotExpressible::ReturnAddressNotSaved:
    return "return address not saved at the cfa";
  case NotExpressible::RegisterRuleNotOffset:
    return "rbp or rbx rule is not an offset";
  case NotExpressible::OffsetDoesNotFit:
    return "save offset does not fit";
  case NotExpressible::TooManyRules:
    return "too many distinct rules";
  }
  return "?";
}

namespace {

bool fits16(int64_t v) {
  return v >= INT16_MIN && v <= INT16_MAX;
}

// Projects one register's rule (absent: `absent_same` ? Same : Unknown); None or the reason.
NotExpressible project(const RowView& row, unsigned reg, bool absent_same, uint8_t& save,
                       int16_t& offset) {
  const RegisterRule* r = row.rule_for(reg);
  if (!r) {
    save = absent_same ? UnwindRule::Same : UnwindRule::Unknown;
    return NotExpressible::None;
  }
  switch (r->kind) {
  case RegisterRule::Kind::SameValue:
    save = UnwindRule::Same;
    return NotExpressible::None;
  case RegisterRule::Kind::Undefined:
    save = UnwindRule::Unknown;
    return NotExpressible::None;
  case RegisterRule::Kind::Offset:
    if (!fits16(r->offset)) return NotExpressible::OffsetDoesNotFit;
    save = UnwindRule::AtCfa;
    offset = static_cast<int16_t>(r->offset);
    return NotExpressible::None;
  default:
    return reg == x86_64::RIP ? NotExpressible::ReturnAddressNotSaved
                              : NotExpressible::RegisterRuleNotOffset;
  }
}

} // namespace

UnwindRule to_unwind_rule(RowView row, const FunctionInfo& fn) {
  auto interpret = [&](NotExpressible why) { return UnwindRule::interpret(why, fn.signal_frame); };
  if (row.cfa.kind != CfaRule::Kind::RegOffset) return interpret(NotExpressible::CfaIsExpression);
  if (fn.return_column != x86_64::RIP) return interpret(NotExpressible::ReturnColumnNotRip);
  UnwindRule out;
  out.signal_frame = fn.signal_frame;
  if (row.cfa.reg == x86_64::RSP)
    out.kind = UnwindRule::CfaRsp;
  else if (row.cfa.reg == x86_64::RBP)
    out.kind = UnwindRule::CfaRbp;
  else
    return interpret(NotExpressible::CfaRegisterNotRspOrRbp);
  if (row.cfa.offset < INT32_MIN || row.cfa.offset > INT32_MAX)
    return interpret(NotExpressible::CfaOffsetDoesNotFit);
  out.cfa_offset = static_cast<int32_t>(row.cfa.offset);
  if (row.rule_for(x86_64::RSP)) return interpret(NotExpressible::RuleForRsp);
  uint8_t rip = 0, rbp = 0, rbx = 0;
  int16_t ro = 0, bo = 0, xo = 0;
  for (NotExpressible why :
       {project(row, x86_64::RIP, false, rip, ro), project(row, x86_64::RBP, true, rbp, bo),
        project(row, x86_64::RBX, true, rbx, xo)})
    if (why != NotExpressible::None) return interpret(why);
  // rip "same value" (a return address that stays in rip) is the evaluator's own rule.
  if (rip == UnwindRule::Same) return interpret(NotExpressible::ReturnAddressNotSaved);
  out.rip = rip;
  out.rip_offset = ro;
  out.rbp = rbp;
  out.rbp_offset = bo;
  out.rbx = rbx;
  out.rbx_offset = xo;
  return out;
}

} // namespace ehelf
