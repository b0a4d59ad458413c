#include "model/backend_oracle.hpp"

#include <cstring>

#include <fmt/format.h>

#include "model/registers.hpp"

namespace ehelf {

uint64_t synthetic_word(uint64_t addr) {
  uint64_t x = addr * 0x9e3779b97f4a7c15ULL;
  return x ^ (x >> 29) ^ 0x5151000000000000ULL;
}

SyntheticStack::SyntheticStack(size_t words) : words_(words) {
  for (size_t i = 0; i < words; ++i)
    words_[i] = synthetic_word(lo() + 8 * i);
}

bool SyntheticStack::read(uint64_t addr, void* out, size_t size) {
  // Reads the real buffer, so an unaligned read straddles two words as a local unwinder's would.
  if (addr < lo() || addr > hi() || hi() - addr < size) return false;
  std::memcpy(out, reinterpret_cast<const void*>(addr), size);
  return true;
}

bool SyntheticMemory::read(uint64_t addr, void* out, size_t size) {
  // A read of several words answers, word by word, what a read of each alone would.
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t done = 0; done < size; done += 8) {
    const uint64_t v = synthetic_word(addr + done);
    std::memcpy(bytes + done, &v, size - done < 8 ? size - done : 8);
  }
  return true;
}

BackendCheck check_backend(const UnwindTable& table, const BackendUnderTest& backend) {
  BackendCheck result;
  result.backend = backend.name;
  constexpr size_t kStackWords = 1 << 16;
  SyntheticStack stack(kStackWords);
  SyntheticMemory anywhere;
  auto note = [&](std::string what) {
    ++result.mismatch_count;
    if (result.mismatches.size() < 20) result.mismatches.push_back(std::move(what));
  };

  for (const TableRange& r : table.ranges()) {
    const FunctionInfo& fn = table.function(r.function);
    // States: at both ends of the range, registers in the middle of the stack (each a distinct
    // value: base + 4 KiB * number); at the last address also every register near the top of
    // the stack, where reads above the CFA are refused (the failure paths must agree too).
    struct State {
      uint64_t pc;
      bool near_top;
    };
    const State states[] = {{r.begin, false}, {r.end - 1, false}, {r.end - 1, true}};
    for (const State& s : states) {
      ++result.checks;
      const uint64_t base = s.near_top ? stack.hi() - 24 : stack.lo() + 8 * (kStackWords / 2);
      RegisterState regs;
      for (unsigned reg = 0; reg < x86_64::kGeneralRegs; ++reg)
        regs.set(reg, base + (s.near_top ? 0 : 0x1000 * reg + 8 * (reg % 3)));
      regs.set(x86_64::RIP, s.pc);
      // A local backend reads only its stack; the near-top state bounds every backend.
      MemoryReader& mem = (backend.local || s.near_top) ? static_cast<MemoryReader&>(stack)
                                                        : static_cast<MemoryReader&>(anywhere);
      const RegisterState before = regs;
      bool signal_frame = false;
      const BackendAnswer answer = backend.step(s.pc, r, regs, mem, stack, signal_frame);
      auto model = table.evaluate(r.row, before, mem, fn.return_column);
      const std::string where = fmt::format("pc {:#x}{}", s.pc, s.near_top ? " (near top)" : "");
      if (answer == BackendAnswer::NotApplicable) {
        ++result.not_applicable;
        continue;
      }
      if (answer == BackendAnswer::Failed) {
        // A failed step leaves the registers as they were (a walk may retry another way).
        for (unsigned reg = 0; reg < x86_64::kGeneralRegs; ++reg)
          if (regs.has(reg) != before.has(reg) ||
              (regs.has(reg) && regs.get(reg) != before.get(reg))) {
            note(fmt::format("{}: {} changed {} on failure", where, backend.name,
                             x86_64::register_name(reg)));
            break;
          }
        if (model)
          note(fmt::format("{}: {} failed but the interpreter unwound", where, backend.name));
        else
          ++result.both_failed;
        continue;
      }
      if (!model) {
        note(fmt::format("{}: {} unwound but the interpreter failed: {}", where, backend.name,
                         model.error().message));
        continue;
      }
      const RegisterState& want = model->caller;
      // The outermost frame: both say the return address is undefined; the walk ends there and
      // no other register is used.
      if (!want.has(x86_64::RIP) && !regs.has(x86_64::RIP)) {
        ++result.agreed;
        continue;
      }
      std::string diff;
      for (unsigned reg = 0; reg < x86_64::kGeneralRegs; ++reg) {
        if (!((backend.registers >> reg) & 1u)) continue;
        if (want.has(reg) == regs.has(reg) && (!want.has(reg) || want.get(reg) == regs.get(reg)))
          continue;
        diff += fmt::format(" {}: {} {}{:#x}, interpreter {}{:#x};", x86_64::register_name(reg),
                            backend.name, regs.has(reg) ? "" : "unknown ", regs.get(reg),
                            want.has(reg) ? "" : "unknown ", want.get(reg));
      }
      if (signal_frame != fn.signal_frame) diff += " signal-frame flag differs;";
      if (diff.empty())
        ++result.agreed;
      else
        note(fmt::format("{}:{}", where, diff));
    }
  }
  return result;
}

} // namespace ehelf
