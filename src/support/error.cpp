#include "support/error.hpp"

#include <fmt/format.h>

namespace ehelf {

std::string Error::to_string() const {
  std::string out = file.empty() ? std::string("<input>") : file;
  if (!section.empty() && has_offset)
    out += fmt::format(": {}+{:#x}", section, offset);
  else if (!section.empty())
    out += fmt::format(": {}", section);
  else if (has_offset)
    out += fmt::format(": offset {:#x}", offset);
  out += ": ";
  out += message;
  return out;
}

} // namespace ehelf
