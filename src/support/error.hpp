// Error: what went wrong while reading input, and where (file, section, byte offset).
#pragma once

#include <cstdint>
#include <string>

namespace ehelf {

// What kind of failure, for callers that act on it (the unwinder's stop reasons) rather than
// print it.
enum class ErrorKind : uint8_t {
  Other,
  BadRead,         // a memory read was refused
  MissingRegister, // a needed register has no known value
};

struct Error {
  std::string message; // what is wrong, e.g. "CIE pointer 0x40 points outside the section"
  std::string file;    // file name; filled in by the layer that knows it
  std::string section; // ".eh_frame", ".debug_frame", ... or empty for the whole file
  uint64_t offset = 0; // byte offset within the section (or the file if section is empty)
  bool has_offset = false;
  ErrorKind kind = ErrorKind::Other;

  static Error at(std::string section, uint64_t offset, std::string message) {
    return Error{std::move(message), {}, std::move(section), offset, true};
  }
  static Error plain(std::string message) { return Error{std::move(message), {}, {}, 0, false}; }
  // An error without a message: building it does not allocate (signal handlers, hot paths).
  static Error quiet(ErrorKind kind) { return Error{{}, {}, {}, 0, false, kind}; }
  Error&& with_kind(ErrorKind k) && {
    kind = k;
    return std::move(*this);
  }

  Error&& in_file(std::string name) && {
    if (file.empty()) file = std::move(name);
    return std::move(*this);
  }

  // One line: "FILE: SECTION+0xOFF: MESSAGE".
  std::string to_string() const;
};

} // namespace ehelf
