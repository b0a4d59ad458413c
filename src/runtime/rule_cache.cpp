#include "runtime/rule_cache.hpp"

namespace ehelf {

HotRule hot_form(const UnwindRule& rule) {
  const HotRule none;
  // After a signal frame the next pc is an interrupted instruction, looked up as is: the walk's
  // slow path keeps track of that.
  if (rule.signal_frame) return none;
  if (rule.kind != UnwindRule::CfaRsp && rule.kind != UnwindRule::CfaRbp) return none;
  HotRule h;
  if (rule.rip == UnwindRule::Unknown) { // the outermost frame (_start): the walk ends here
    h.op = HotRule::kEnd | HotRule::kSlow;
    return h;
  }
  if (rule.rip != UnwindRule::AtCfa || rule.rip_offset != -8) return none;
  if (rule.cfa_offset < INT16_MIN || rule.cfa_offset > INT16_MAX) return none;
  h.cfa_offset = static_cast<int16_t>(rule.cfa_offset);
  uint8_t op = 0; // an rsp-based CFA, nothing saved that the walk tracks
  if (rule.kind == UnwindRule::CfaRbp)
    op |= HotRule::kRbpBased;
  else if (rule.cfa_offset < 8)
    return none; // the fast path assumes the return address >= rsp
  auto small = [](int16_t off) {
    return off % 8 == 0 && off / 8 >= INT8_MIN && off / 8 <= INT8_MAX;
  };
  if (rule.rbp == UnwindRule::AtCfa) {
    if (!small(rule.rbp_offset)) return none;
    op |= HotRule::kRbpSaved;
    h.rbp_offset8 = static_cast<int8_t>(rule.rbp_offset / 8);
  } else if (rule.rbp == UnwindRule::Unknown) {
    return none;
  }
  if (rule.rbx == UnwindRule::AtCfa) {
    const int off8 = rule.rbx_offset / 8;
    if (rule.rbx_offset % 8 != 0 || off8 < -8 || off8 > -1) return none;
    op |= HotRule::kRbxSaved | uint8_t((-1 - off8) << HotRule::kRbxShift);
  } else if (rule.rbx == UnwindRule::Unknown) {
    return none;
  }
  // The walk's fast path reads the saved rbp without a bound of its own: it must be inside the
  // frame, [rsp, CFA - 8), for an rsp-based CFA, and at CFA - 16 (the frame-pointer prologue's
  // push) for an rbp-based one, whose CFA the walk keeps at least 16 above rsp. An rbp-based CFA
  // is taken only with rbp saved there (the frame-pointer frame; others are rare), so that the
  // walk reads it without a test.
  bool fast;
  if (op & HotRule::kRbpBased)
    fast = (op & HotRule::kRbpSaved) && h.rbp_offset8 == -2;
  else
    fast = !(op & HotRule::kRbpSaved) ||
           (h.rbp_offset8 <= -2 && 8 * int(h.rbp_offset8) >= -int(h.cfa_offset));
  h.op = uint8_t(op | (fast ? 0 : HotRule::kSlow));
  return h;
}

} // namespace ehelf
