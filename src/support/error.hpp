// Error: what went wrong while reading input, and where (file, section, byte offset).
#pragma once

#include <cstdint>
#include <string>

namespace ehelf {

struct Error {
  std::string message;   // what is wrong, e.g. "CIE pointer 0x40 points outside the section"
  std::string file;      // file name; filled in by the layer that knows it
  std::string section;   // ".eh_frame", ".debug_frame", ... or empty for the whole file
  uint64_t offset = 0;   // byte offset within the section (or the file if section is empty)
  bool has_offset = false;

  static Error at(std::string section, uint64_t offset, std::string message) {
    return Error{std::move(message), {}, std::move(section), offset, true};
  }
  static Error plain(std::string message) { return Error{std::move(message), {}, {}, 0, false}; }

  Error&& in_file(std::string name) && {
    if (file.empty()) file = std::move(name);
    return std::move(*this);
  }

  // One line: "FILE: SECTION+0xOFF: MESSAGE".
  std::string to_string() const;
};

} // namespace ehelf
