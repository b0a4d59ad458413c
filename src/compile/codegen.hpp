// Code generation: an UnwindTable becomes the C source of an eh_elf (see include/ehelf/eh_elf.h).
//
// Design: identical row bodies are outlined (rows are projected onto the tracked registers, so
// rows that differ only in untracked columns share a body); rows of the common shape (CFA =
// register + offset, saves at CFA + 8k) are one call of a shared step with their constants, so
// their bodies are a few instructions each; adjacent ranges with the same body
// are merged; the lookup is a sorted array of 32-bit range starts, narrowed by a per-4-KiB page
// index (as the kernel's ORC unwinder does) and finished by a short binary search; the body is
// then chosen by a switch the compiler turns into a jump table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "eh_elf/register_slots.hpp"
#include "model/unwind_table.hpp"
#include "support/result.hpp"
#include "support/safe_text.hpp"

namespace ehelf {

extern const char* const kEhElfAbiHeader; // include/ehelf/eh_elf.h, embedded at build time

// How the generated code finds the range of a pc:
//   Table: 16-bit range starts in .rodata, a per-4-KiB page index, then a short binary search
//          (ORC-style; about 4 bytes per range).
//   Tree:  the paper's design, a binary decision tree of comparisons in the code itself.
enum class LookupKind { Table, Tree };

// Bounds on what one input can make `compile` generate. Real libraries need few bodies and little
// C (libLLVM-15, the largest here: 1,001 bodies, 9.2 MiB of C, cc 5.9 s and 253 MB; libc: 374
// bodies); a crafted table of 16,000 distinct rows took cc 37 s and 824 MB, one of 300,000 took
// 686 s and 5.4 GB. Over a bound, generation stops early with an error starting with
// kTooLargeToCompile, and the module is left to the table backend.
inline constexpr uint64_t kMaxBodies = 8192;
inline constexpr uint64_t kMaxSourceBytes = uint64_t(64) << 20;
inline constexpr std::string_view kTooLargeToCompile = "too large to compile";

struct CodegenOptions {
  RegisterSet registers = RegisterSet::Minimal;
  LookupKind lookup = LookupKind::Table;
  std::span<const uint8_t> build_id; // of the source ELF, embedded in ehelf_eh_elf_info
  std::string source_name;           // for the generated file's comment, through comment_safe
  uint64_t max_bodies = kMaxBodies;
  uint64_t max_source_bytes = kMaxSourceBytes;
};

struct CodegenStats {
  uint64_t table_rows = 0;   // distinct rows in the model
  uint64_t model_ranges = 0; // ranges in the model
  uint64_t ranges = 0;       // ranges in the generated lookup table (after merging, with gaps)
  uint64_t bodies = 0;       // distinct compiled bodies
  uint64_t fallback_bodies = 0;
  uint64_t fallback_ranges = 0; // model ranges whose body answers "needs interpreter"
  uint64_t pc_low = 0;
  uint64_t pc_high = 0;
};

// The C source of the eh_elf, or an error (e.g. the module spans more than 4 GiB).
Result<std::string> generate_eh_elf_source(const UnwindTable& table, const CodegenOptions& options,
                                           CodegenStats* stats = nullptr);

} // namespace ehelf
