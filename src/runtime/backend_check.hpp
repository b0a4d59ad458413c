// The runtime's backends held to the backend oracle (model/backend_oracle.hpp): the compact
// table's rules, their hot forms in the rule cache, the frame-pointer step where a row says the
// function keeps a frame pointer, the rows cursor steps remember, and a compiled eh_elf when one
// is given.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "eh_elf/eh_elf_object.hpp"
#include "model/backend_oracle.hpp"
#include "model/unwind_table.hpp"
#include "support/result.hpp"

namespace ehelf {

// One BackendCheck per backend, in the order compact, hot form, frame pointer, remembered row
// (a cursor step's RowCache entry), then the eh_elf's remote and local variants when `compiled`
// is given.
std::vector<BackendCheck> check_runtime_backends(const UnwindTable& table,
                                                 const EhElfObject* compiled = nullptr);

// A check of a backend the runtime does not know (the BPF rows: bpf/bpf_check.hpp) on a table.
using TableCheck = std::function<BackendCheck(const UnwindTable&)>;

// The same for an ELF file's tables (.eh_frame, else .debug_frame), with its eh_elf from the
// cache when `with_cached_eh_elf` and one is there, then each of `more` on the same table. An
// error when the file or its tables cannot be read; an empty list for a file without tables.
Result<std::vector<BackendCheck>> check_file_backends(const std::string& path,
                                                      bool with_cached_eh_elf,
                                                      std::span<const TableCheck> more = {});

// "compact table: 61,000 checks, 60,102 agree, 12 both refuse, 886 not handled, 0 mismatches"
// (not handled: left to the interpreter), then the first mismatches on their own lines.
std::string describe(const BackendCheck& c);

} // namespace ehelf
