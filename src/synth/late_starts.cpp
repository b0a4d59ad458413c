#include "synth/late_starts.hpp"

#include <algorithm>

#include "x86/abi.hpp"

namespace ehelf::synth {

bool opens_frame(const x86::Decoder& decoder, const CodeSection& c, uint64_t a, uint64_t end) {
  auto bytes = c.bytes.subspan(a - c.begin);
  if (x86::starts_with_endbr64(bytes)) {
    a += x86::kEndbr64.size(), bytes = bytes.subspan(x86::kEndbr64.size());
    if (a >= end) return false;
  }
  auto in = decoder.decode(bytes, a);
  if (!in || in->op_count == 0) return false;
  const x86::StackOp& op = in->ops[0];
  if (op.kind == x86::StackOp::Kind::rsp_add && op.disp < 0 && in->op_count == 1) return true;
  if (in->op_count != 2 || op.kind != x86::StackOp::Kind::rsp_add || op.disp != -8) return false;
  const x86::Reg r = in->ops[1].reg;
  return in->ops[1].kind == x86::StackOp::Kind::store &&
         (x86::callee_saved(r) || r == x86::Reg::none); // none: `push $imm` (kept as it was)
}

std::vector<uint64_t> unreached_address_taken(const Discovery& d, const SynthResult& result) {
  std::vector<uint64_t> starts;
  for (uint64_t a : d.address_taken) {
    if (d.names.count(a) || d.known_function_holding(a)) continue;
    auto it =
        std::upper_bound(result.instructions.begin(), result.instructions.end(), a,
                         [](uint64_t v, const AnalysedInstruction& in) { return v < in.address; });
    if (it != result.instructions.begin() && a < std::prev(it)->address + std::prev(it)->length)
      continue;
    starts.push_back(a);
  }
  return starts;
}

std::vector<uint64_t> prologue_starts(const Discovery& d, const SynthResult& result,
                                      const x86::Decoder& decoder) {
  std::vector<uint64_t> starts;
  if (d.shipped) return starts;
  auto consider = [&](const CodeSection& c, uint64_t from, uint64_t to, bool after_end) {
    // Past the padding (an undecodable byte stops there: no prologue decodes at it).
    const uint64_t a = from + decoder.sweep(c.bytes.subspan(from - c.begin), from,
                                            [&](const x86::Instruction& in, uint64_t off) {
                                              return from + off < to && in.padding;
                                            });
    if (a >= to || d.names.count(a) || d.known_function_holding(a)) return;
    if (!(a > from ? a % 16 == 0 : after_end)) return;
    if (!opens_frame(decoder, c, a, to)) return;
    starts.push_back(a);
  };
  for (const CodeSection& c : d.code) {
    auto it =
        std::lower_bound(result.instructions.begin(), result.instructions.end(), c.begin,
                         [](const AnalysedInstruction& in, uint64_t v) { return in.address < v; });
    uint64_t at = c.begin;
    uint64_t last = 0; // the analysed instruction ending at `at` (0: the section's start)
    // Whether no path goes on past `last` (decoded only where a gap follows it).
    auto after_end = [&] {
      if (!last) return true;
      auto in = decoder.decode(c.bytes.subspan(last - c.begin), last);
      return in && (in->flow == x86::Flow::ret || in->flow == x86::Flow::jump ||
                    in->flow == x86::Flow::jump_indirect || in->flow == x86::Flow::trap ||
                    (in->flow == x86::Flow::call && d.noreturn.count(in->target)));
    };
    for (; it != result.instructions.end() && it->address < c.end; ++it) {
      if (it->address > at) consider(c, at, it->address, after_end());
      if (it->address + it->length > at) {
        at = it->address + it->length;
        last = it->address;
      }
    }
    if (at < c.end) consider(c, at, c.end, after_end());
  }
  return starts;
}

} // namespace ehelf::synth
