#include "bpf/bpf_check.hpp"

#include "bpf/bpf_twin.hpp"
#include "model/registers.hpp"

namespace ehelf {

BackendUnderTest bpf_rows_backend(const BpfTable& rows) {
  BackendUnderTest b{"bpf rows", kBpfRegisters, false, {}};
  b.step = [&rows](uint64_t pc, const TableRange&, RegisterState& regs, MemoryReader& mem,
                   const SyntheticStack&, bool& signal_frame) {
    const RegisterState callee = regs;
    switch (bpf_twin_step(rows, pc, regs, mem, signal_frame)) {
    case EHELF_STOP_OK:
      // The same step taken again from the CPU's last walk, as the program does, must be too
      // (a failed step leaves the registers as they were).
      if (bpf_twin_memo_sound(rows, pc, callee, mem)) return BackendAnswer::Unwound;
      regs = callee;
      return BackendAnswer::Failed;
    case EHELF_STOP_END:
      // The outermost frame: the model must also leave the return address undefined.
      regs.clear(x86_64::RIP);
      return BackendAnswer::Unwound;
    case EHELF_STOP_NOT_EXPRESSIBLE:
      return BackendAnswer::NotApplicable;
    default:
      return BackendAnswer::Failed;
    }
  };
  return b;
}

BackendCheck check_bpf_rows(const UnwindTable& table) {
  auto rows = encode_bpf_rows(table);
  if (!rows) {
    BackendCheck refused;
    refused.backend = "bpf rows";
    refused.mismatches.push_back("not encoded: " + rows.error().to_string());
    return refused;
  }
  return check_backend(table, bpf_rows_backend(*rows));
}

} // namespace ehelf
