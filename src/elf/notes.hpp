// ELF notes: the build id among a notes section's or segment's contents (ElfFile::build_id),
// or among the running kernel's (/sys/kernel/notes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace ehelf {

// The NT_GNU_BUILD_ID note's bytes among `notes`, if there is one.
std::optional<std::span<const uint8_t>> build_id_in_notes(std::span<const uint8_t> notes);

} // namespace ehelf
