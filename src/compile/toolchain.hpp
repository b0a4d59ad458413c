// Building a shared object from generated C with the system compiler.
#pragma once

#include <string>

#include "support/result.hpp"

namespace ehelf {

struct ToolchainOptions {
  std::string compiler;           // default: $EHELF_CC, else "cc"
  // -O1: the bodies are straight-line code; -O2 made them no faster to run but twice as slow to
  // compile (libc: 1.2 s against 2.5 s).
  std::string optimization = "-O1";
  bool keep_source = false;       // leave OUT.c next to OUT.so (for inspection)
};

// Compiles `source` into the shared object `output` (written atomically: a temporary then a
// rename). Errors carry the compiler's first lines of diagnostics.
Status build_shared_object(const std::string& source, const std::string& output,
                           const ToolchainOptions& options = {});

} // namespace ehelf
