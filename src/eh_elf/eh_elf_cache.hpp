// The eh_elf cache: where it is, when it may be used, and loading an entry only when that is safe.
//
// Trust: an entry is loaded into every process that unwinds with the compiled backend, so the
// cache must be as private as the user's own files. The directory and the entry must be owned by
// the effective user or root and not writable by group or others, and so must every directory
// above it (unless sticky, as /tmp); the entry is opened without
// following a symbolic link or blocking on a FIFO, must be a regular file, and is checked
// (check_eh_elf_image) before it is loaded. Anything else is refused with one line on stderr and
// the module is unwound from its tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <sys/stat.h>

#include "eh_elf/eh_elf_object.hpp"
#include "eh_elf/register_slots.hpp"
#include "support/result.hpp"

namespace ehelf {

// $EHELF_CACHE, else $XDG_CACHE_HOME/ehelf, else $HOME/.cache/ehelf (XDG_CACHE_HOME and HOME only
// when absolute). The environment is read with secure_getenv semantics, and a privileged process
// (AT_SECURE: setuid, setgid, file capabilities) has no cache at all: it unwinds from the tables.
// nullopt when there is no cache.
std::optional<std::string> cache_directory();

// "<build-id>.<minimal|callee-saved>.so".
std::string cache_file_name(const std::string& build_id_hex, RegisterSet registers);

// Why a cache directory or entry with this status is not trusted, or an empty string.
std::string untrusted_owner_or_mode(const struct stat& st);

// For `ehelf compile --cache`: creates the directory if needed (mode 0700) and checks it.
Result<std::string> prepare_cache_directory();

// The cached eh_elf of the module with this build-id, or nullptr when there is none or it is
// refused (one line on stderr per refused file).
std::unique_ptr<EhElfObject> load_cached_eh_elf(std::span<const uint8_t> build_id,
                                                RegisterSet registers);

} // namespace ehelf
