// The BPF rows held to the backend oracle (model/backend_oracle.hpp): the user-space twin of the
// kernel's step (bpf_twin.hpp) over the rows encoded from a table, against the model on that
// table, on rip, rsp, rbp and rbx (the registers the kernel tracks).
#pragma once

#include "bpf/bpf_rows.hpp"
#include "model/backend_oracle.hpp"

namespace ehelf {

// rip, rsp, rbp, rbx.
inline constexpr uint32_t kBpfRegisters = (1u << 16) | (1u << 7) | (1u << 6) | (1u << 3);

// The twin as a backend: STOP rows are not handled (the kernel's walk stops there: a user-space
// unwinder takes over), END rows unwind to an undefined return address, NONE rows fail, and so
// does a step whose memo the program could not take again soundly (bpf_twin_memo_sound).
BackendUnderTest bpf_rows_backend(const BpfTable& rows);

// check_backend of the rows encoded from `table` ("bpf rows"); when the table cannot be encoded
// (beyond 4 GiB), no checks and the reason as the only line of `mismatches`, not counted.
BackendCheck check_bpf_rows(const UnwindTable& table);

} // namespace ehelf
