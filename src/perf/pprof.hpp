// pprof: profiles in the profile.proto format that `pprof`, Grafana Pyroscope and Parca read
// (github.com/google/pprof, proto/profile.proto), gzip-compressed as `pprof` writes them.
//
// What goes where:
//   sample_type     [samples/count, VALUE/UNIT]: the sample count and the summed periods (for
//                   cpu-clock and task-clock: cpu/nanoseconds)
//   sample          one per distinct stack: location ids leaf first, the two values, labels
//                   "pid" and "tid" (num) and "comm" (str)
//   location        one per distinct (frame address, name): the actual address, the mapping, one
//                   line naming the function
//   function        one per distinct (name, module); name as printed (demangled), system_name the
//                   same, filename the module
//   mapping         one per mapping of a file in a process (FileMapping): its start and limit,
//                   the file offset mapped at its start, the path, the build id (hex of the
//                   NT_GNU_BUILD_ID note, as pprof and Parca match binaries by) and
//                   has_functions (the names are already resolved: pprof must not re-symbolize);
//                   the kernel's frames in its image get the image's (PprofOptions::kernel);
//                   other frames in no mapped file one per module name, over the addresses
//                   sampled in it
//   period_type     VALUE/UNIT, period: the sampling period (1e9 / frequency for cpu-clock)
// Frames without a symbol are named as folded stacks name them ("[libc.so.6]", "0x1234").
// The message is encoded with libprotobuf-lite's varint writer and gzipped by zlib (no generated
// code: the field numbers above are the format's published ones).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "perf/sample_stack.hpp"
#include "support/result.hpp"

namespace ehelf::perf {

struct PprofOptions {
  std::string value_type = "cpu"; // what the second value counts
  std::string value_unit = "nanoseconds";
  int64_t period = 0;     // events between samples (0: unknown)
  int64_t time_nanos = 0; // when the recording started, since the epoch
  int64_t duration_nanos = 0;
  // The kernel image's mapping ([kernel.kallsyms]: its code's start and limit, the file offset
  // perf gives it, its build id), for kernel frames within it; when unknown (end 0), kernel
  // frames get a mapping over the addresses sampled in them.
  FileMapping kernel;
};

// Writes `stacks` to `out` (gzip-compressed profile.proto); the stream's own failures are the
// caller's to check.
Status write_pprof(std::ostream& out, const std::vector<CountedStack>& stacks,
                   const PprofOptions& options);

} // namespace ehelf::perf
