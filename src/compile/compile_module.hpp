// compile_module: ELF file -> unwind table -> generated C -> eh_elf shared object, with the
// size/time report of the paper's Table 2.
#pragma once

#include <functional>
#include <string_view>

#include <string>

#include <optional>

#include "compile/codegen.hpp"
#include "compile/differential.hpp"
#include "compile/toolchain.hpp"
#include "support/result.hpp"

namespace ehelf {

struct CompileOptions {
  RegisterSet registers = RegisterSet::Minimal;
  LookupKind lookup = LookupKind::Table;
  ToolchainOptions toolchain;
  // Load the result and check it against the interpreter (see differential.hpp).
  bool verify = false;
  // Told as each phase starts ("reading the tables", "generating code", "compiling (cc)",
  // "verifying"): a large library takes tens of seconds, most of them in the C compiler.
  std::function<void(std::string_view phase)> on_phase;
};

struct CompileReport {
  std::string source;
  std::string output;
  // Sizes in bytes.
  uint64_t text_rodata = 0; // source .text + .rodata ("original program size")
  uint64_t eh_frame = 0;    // source .eh_frame (+ .debug_frame if that is what was compiled)
  uint64_t eh_frame_hdr = 0;
  uint64_t eh_elf_text = 0;   // the eh_elf's .text (code: lookup and bodies)
  uint64_t eh_elf_rodata = 0; // the eh_elf's .rodata (range table and page index)
  uint64_t eh_elf_file = 0;
  CodegenStats codegen;
  double load_ms = 0, codegen_ms = 0, cc_ms = 0;
  std::optional<DifferentialResult> verification;
  double total_ms() const { return load_ms + codegen_ms + cc_ms; }
  // eh_elf .text + .rodata against the source's .eh_frame.
  double growth() const {
    return eh_frame ? double(eh_elf_text + eh_elf_rodata) / double(eh_frame) : 0;
  }
};

// Compiles `path`'s tables into `output`. Files without tables are an error.
Result<CompileReport> compile_module(const std::string& path, const std::string& output,
                                     const CompileOptions& options = {});

} // namespace ehelf
