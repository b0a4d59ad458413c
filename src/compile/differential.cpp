#include "compile/differential.hpp"

#include <cstring>
#include <fmt/format.h>

namespace ehelf {
namespace {

// Synthetic memory: every aligned word's value is a hash of its address, so each read has a
// distinct, checkable answer. Remotely every address is readable; locally only the stack buffer.
uint64_t word_at(uint64_t addr) {
  uint64_t x = addr * 0x9e3779b97f4a7c15ULL;
  return x ^ (x >> 29) ^ 0x5151000000000000ULL;
}

class SyntheticMemory final : public MemoryReader {
public:
  SyntheticMemory(uint64_t lo, uint64_t hi, bool bounded) : lo_(lo), hi_(hi), bounded_(bounded) {}
  bool read(uint64_t addr, void* out, size_t size) override {
    if (bounded_) {
      // The local variant reads the real buffer, so unaligned reads straddle two words: read
      // the same bytes.
      if (addr < lo_ || addr > hi_ || hi_ - addr < size) return false;
      std::memcpy(out, reinterpret_cast<const void*>(addr), size);
      return true;
    }
    uint64_t v = word_at(addr);
    std::memcpy(out, &v, size < 8 ? size : 8);
    return true;
  }

private:
  uint64_t lo_, hi_;
  bool bounded_;
};

int synthetic_deref(uint64_t addr, uint64_t* value, void*) {
  *value = word_at(addr);
  return 0;
}

} // namespace

DifferentialResult check_eh_elf(const UnwindTable& table, const EhElfObject& object,
                                RegisterSet registers) {
  DifferentialResult result;
  const unsigned nslots = slot_count(registers);
  // A stack buffer for the local variant, filled with the same synthetic words.
  constexpr size_t kStackWords = 1 << 16;
  std::vector<uint64_t> stack(kStackWords);
  uint64_t stack_lo = reinterpret_cast<uint64_t>(stack.data());
  for (size_t i = 0; i < kStackWords; ++i)
    stack[i] = word_at(stack_lo + 8 * i);
  uint64_t stack_hi = stack_lo + 8 * kStackWords;

  auto note = [&](std::string what) {
    ++result.mismatch_count;
    if (result.mismatches.size() < 20) result.mismatches.push_back(std::move(what));
  };

  for (const TableRange& r : table.ranges()) {
    const FunctionInfo& fn = table.function(r.function);
    for (uint64_t pc : {r.begin, r.end - 1}) {
      for (bool remote : {true, false}) {
        ++result.checks;
        // All general registers known; rsp and rbp point into the middle of the stack buffer
        // (so rsp/rbp-relative reads land inside it), the others hold distinct values.
        // At the last address, the local variant gets a stack pointer near the top of the buffer
        // so that reads past it are refused by both sides.
        bool near_top = !remote && pc != r.begin;
        uint64_t base = near_top ? stack_hi - 24 : stack_lo + 8 * (kStackWords / 2);
        RegisterState regs;
        for (unsigned reg = 0; reg < x86_64::kGeneralRegs; ++reg)
          regs.set(reg, base + (near_top ? 0 : 0x1000 * reg + 8 * (reg % 3)));
        regs.set(x86_64::RIP, pc);
        ehelf_context_t ctx{};
        for (unsigned slot = 0; slot < nslots; ++slot) {
          ctx.regs[slot] = regs.get(kDwarfRegisterOfSlot[slot]);
          ctx.flags |= EHELF_VALID(slot);
        }
        ctx.stack_lo = stack_lo;
        ctx.stack_hi = stack_hi;
        ehelf_context_t before = ctx;
        int rc = remote ? object.unwind_remote(pc, &ctx, synthetic_deref, nullptr)
                        : object.unwind_local(pc, &ctx);
        SyntheticMemory mem(stack_lo, stack_hi, !remote);
        auto step = table.evaluate(r.row, regs, mem, fn.return_column);
        const char* variant = remote ? "remote" : "local";
        if (rc == EHELF_NEEDS_INTERPRETER) {
          ++result.fallbacks;
          continue;
        }
        if (rc != EHELF_OK) {
          if (step)
            note(fmt::format("pc {:#x} ({}): eh_elf failed with {} but the interpreter "
                             "succeeded",
                             pc, variant, rc));
          else
            ++result.both_failed;
          if (std::memcmp(ctx.regs, before.regs, sizeof ctx.regs) != 0)
            note(fmt::format("pc {:#x} ({}): eh_elf changed registers on failure", pc, variant));
          continue;
        }
        if (!step) {
          note(fmt::format("pc {:#x} ({}): eh_elf succeeded but the interpreter failed: {}", pc,
                           variant, step.error().message));
          continue;
        }
        bool same = true;
        std::string diff;
        for (unsigned slot = 0; slot < nslots; ++slot) {
          unsigned reg = kDwarfRegisterOfSlot[slot];
          bool v_compiled = (ctx.flags >> slot) & 1u;
          bool v_interp = step->caller.has(reg);
          if (v_compiled != v_interp || (v_compiled && ctx.regs[slot] != step->caller.get(reg))) {
            same = false;
            diff += fmt::format(" {}: eh_elf {}{:#x} interpreter {}{:#x};",
                                x86_64::register_name(reg), v_compiled ? "" : "unknown ",
                                ctx.regs[slot], v_interp ? "" : "unknown ", step->caller.get(reg));
          }
        }
        bool signal = (ctx.flags & EHELF_FLAG_SIGNAL_FRAME) != 0;
        if (signal != fn.signal_frame) {
          same = false;
          diff += " signal-frame flag differs;";
        }
        if (same)
          ++result.agreed;
        else
          note(fmt::format("pc {:#x} ({}):{}", pc, variant, diff));
      }
    }
  }
  return result;
}

} // namespace ehelf
