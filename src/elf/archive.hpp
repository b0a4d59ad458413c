// The members of an `ar` archive (a static library, `libfoo.a`), as readelf reads one: each
// member an ELF file of its own that `ehelf dump` prints under "File: ARCHIVE(MEMBER)".
//
// Format (System V / GNU ar): "!<arch>\n", then members, each a 60-byte header (name[16],
// date[12], uid[6], gid[6], mode[8], size[10] in decimal, "`\n") and `size` bytes of data,
// padded to an even offset. GNU names end with '/'; "/" and "/SYM64/" hold the symbol index and
// "//" the names longer than 15 bytes, which members give as "/OFFSET" into it (each ending in
// "/\n"). BSD's "#1/LEN" names (the name in the data's first LEN bytes) are read as readelf
// reads them: a member "#1" whose data starts with the name. A thin archive
// ("!<thin>\n") holds only the names of files elsewhere: it is refused (dump those files).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "support/error.hpp"

namespace ehelf {

struct ArchiveMember {
  std::string name;               // as ar prints it ("a.o", a long name in full)
  uint64_t offset = 0;            // of its data in the archive
  std::span<const uint8_t> bytes; // its data, inside the archive's bytes
};

struct ArchiveListing {
  std::vector<ArchiveMember> members; // every member read, the indexes left out
  // Where reading stopped before the end and why (offset in the archive); the members before
  // it are listed.
  std::optional<Error> damage;
};

// Whether `bytes` start as an archive ("!<arch>\n"), or as a thin one ("!<thin>\n").
bool is_archive(std::span<const uint8_t> bytes);
bool is_thin_archive(std::span<const uint8_t> bytes);

// The members of an archive (is_archive(bytes)). A long name outside its table is damage.
ArchiveListing read_archive(std::span<const uint8_t> bytes);

} // namespace ehelf
