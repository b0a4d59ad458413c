#include "support/safe_text.hpp"

#include <fmt/format.h>

namespace ehelf {

std::string comment_safe(std::string_view text) {
  constexpr size_t kMaxBytes = 256; // of the input shown; the rest becomes "..."
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxBytes; ++i) {
    unsigned char ch = static_cast<unsigned char>(text[i]);
    bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '/' || ch == '-';
    if (plain)
      out += static_cast<char>(ch);
    else
      out += fmt::format("\\x{:02x}", ch);
  }
  if (text.size() > kMaxBytes) out += "...";
  return out;
}

std::string message_safe(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto ch = static_cast<unsigned char>(c);
    if (ch < 0x20 || ch == 0x7f)
      out += fmt::format("\\x{:02x}", ch);
    else
      out += c;
  }
  return out;
}

} // namespace ehelf
