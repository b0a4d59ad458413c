// Building a shared object from generated C with the system compiler.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "support/result.hpp"

namespace ehelf {

struct ToolchainOptions {
  std::string compiler; // default: $EHELF_CC, else "cc"
  // -O1: the bodies are straight-line code; -O2 made them no faster to run but twice as slow to
  // compile (libc: 1.2 s against 2.5 s).
  std::string optimization = "-O1";
  bool keep_source = false; // leave OUT.c next to OUT.so (for inspection)
  // Limits of the C compiler and of everything it starts (setrlimit RLIMIT_CPU and RLIMIT_AS).
  // The largest bounded input (kMaxBodies, kMaxSourceBytes in codegen.hpp) needs far less.
  unsigned cpu_seconds = 300;
  uint64_t memory_bytes = uint64_t(4) << 30;
};

// Compiles `source` into the shared object `output`. The compiler runs in a private scratch
// directory next to `output` (mkdtemp: no predictable names, removed on every path; in $TMPDIR
// or /tmp when `output` is a device such as /dev/null), in its own process group that dies with
// ehelf (PR_SET_PDEATHSIG), under the limits above. `inspect`, if given, is called with the
// object built before it is published (measured, verified); an error there publishes nothing.
// The object is written as an OutputFile (support/output_file.hpp): unwritable by group and
// others, renamed into place atomically, so a reader sees the old object or the new one, never a
// partial one; a link, directory or FIFO at `output` is refused before the compiler runs. Errors
// carry the compiler's first diagnostics.
Status build_shared_object(const std::string& source, const std::string& output,
                           const ToolchainOptions& options = {},
                           const std::function<Status(const std::string& built)>& inspect = {});

} // namespace ehelf
