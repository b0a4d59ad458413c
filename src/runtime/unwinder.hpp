// Unwinder: steps from one frame's registers to its caller's, choosing per module among the
// compiled eh_elf, the compact table and the interpreter, with a direct-mapped rule cache in
// front and the hardening a profiler needs (bounded reads, growing CFA, depth cap).
#pragma once

#include <array>
#include <cstring>
#include <cstdint>
#include <string_view>

#include "model/register_state.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"

namespace ehelf {

enum class BackendKind { Auto, Compiled, Table, Interpreter };
std::string_view backend_name(BackendKind b);

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

struct FrameInfo {
  uint64_t pc = 0;          // the frame's pc (a return address for frames after the first)
  uint64_t sp = 0;
  const Module* module = nullptr;
  bool signal_frame = false;       // this frame's FDE is a signal trampoline ('S')
  bool via_frame_pointer = false;  // the step to the caller followed rbp: the module has no table
  BackendKind backend = BackendKind::Auto; // what unwound this frame
};

struct UnwinderOptions {
  BackendKind backend = BackendKind::Auto; // Auto: compiled if cached, else table, else interpreter
  size_t max_depth = 512;
  bool allow_loading = true; // load module data on first use (off in signal handlers)
  bool frame_pointer_fallback = true;
  bool use_cache = true;
  LoadPolicy policy;
};

class Unwinder {
public:
  Unwinder(ModuleMap& map, UnwinderOptions options = {}) : map_(map), options_(options) {}

  // One step: `regs` holds the frame's registers (rip = its pc) and becomes the caller's.
  // `exact_pc`: rip is the address of the interrupted instruction (first frame, or the frame
  // after a signal frame) rather than a return address, so it is looked up as is, not minus 1.
  // On return, `info` describes the frame that was unwound.
  StopReason step(RegisterState& regs, MemoryReader& mem, bool exact_pc, FrameInfo& info);

  // Walks from `regs`, filling up to `max` frames (the first is regs' own frame). Returns the
  // frame count; `why` says why the walk ended. `exact_first`: regs.rip is an interrupted pc
  // (ptrace, perf sample, signal context) rather than a return address (capture_local()).
  size_t backtrace(RegisterState regs, MemoryReader& mem, FrameInfo* out, size_t max,
                   StopReason* why = nullptr, bool exact_first = true);

  // The hot path for in-process profilers: walks the calling thread's stack (reads checked
  // against `stack`), writing only pcs. Frames whose rule is in the cache cost a hash, one
  // compare and one or two bounds-checked loads; others go through step(). Returns the count.
  size_t backtrace_local(const RegisterState& regs, AddressRange stack, uint64_t* pcs, size_t max,
                         StopReason* why = nullptr, bool exact_first = false);

  // Drops cached rules (call when the module map changed).
  void clear_cache() { std::memset(static_cast<void*>(cache_.data()), 0, sizeof cache_); }

  ModuleMap& map() { return map_; }
  const UnwinderOptions& options() const { return options_; }

private:
  // A cached rule in the shape the hot loop wants (16 bytes): the return address is at CFA-8
  // (rules where it is not are never cached), saved rbp/rbx offsets are multiples of 8.
  struct HotRule {
    uint64_t pc = 0; // the lookup pc (0: empty)
    int32_t cfa_offset = 0;
    int8_t rbp_offset8 = 0; // rbp saved at CFA + 8 * rbp_offset8
    int8_t rbx_offset8 = 0;
    uint8_t op = 0;         // kHotRbpSaved/kHotRbxSaved: zero for the common "only rip" rules
    uint8_t base = 0;       // 0: CFA = rsp + offset; 1: CFA = rbp + offset; 2: end of stack
  };
  static_assert(sizeof(HotRule) == 16);
  static constexpr uint8_t kHotRbpSaved = 2;   // caller's rbp at CFA + 8 * rbp_offset8
  static constexpr uint8_t kHotRbxSaved = 8;
  // Rules that make rbp or rbx unknown are never cached: the hot loop only ever learns values.
  static bool make_hot(const CompactRule& rule, uint64_t pc, HotRule& out);
  // Caches the rule for `lookup` from its module's compact table; false if it has none.
  bool fill_hot(uint64_t lookup);
  StopReason apply_hot(const HotRule& rule, RegisterState& regs, MemoryReader& mem);

  // Direct-mapped, 512 entries (Valgrind uses 509 with a modulo; a multiplicative hash into a
  // power of two avoids the division on the hot path).
  static constexpr size_t kCacheBits = 9;
  static constexpr size_t kCacheSize = size_t(1) << kCacheBits;
  static size_t cache_index(uint64_t pc) {
    return static_cast<size_t>((pc * 0x9e3779b97f4a7c15ULL) >> (64 - kCacheBits));
  }

  StopReason apply_compact(const CompactRule& rule, RegisterState& regs, MemoryReader& mem);
  StopReason interpret(const ModuleData& data, uint64_t svma, RegisterState& regs,
                       MemoryReader& mem, bool& signal_frame);
  StopReason run_compiled(const ModuleData& data, uint64_t svma, RegisterState& regs,
                          MemoryReader& mem, bool& signal_frame, bool& fallback);
  StopReason frame_pointer_step(RegisterState& regs, MemoryReader& mem);

  ModuleMap& map_;
  UnwinderOptions options_;
  std::array<HotRule, kCacheSize> cache_{};
};

} // namespace ehelf
