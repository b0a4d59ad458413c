// Finding, from what an address space's reader returns, which traced process it reads: for
// libunwind's remote API when the caller's accessors are not ehelf's _UPT_ ones (they read some
// process, but do not say which).
#pragma once

#include <cstdint>
#include <sys/types.h>

namespace ehelf {

// The one process traced by a thread of this process whose 8-byte words at `addrs` are
// `expected` (e.g. the words at a thread's stack pointer and pc); 0 when none or several match.
pid_t find_traced_process(const uint64_t (&addrs)[2], const uint64_t (&expected)[2]);

} // namespace ehelf
