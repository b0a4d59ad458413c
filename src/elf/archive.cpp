#include "elf/archive.hpp"

#include <cstring>
#include <fmt/format.h>
#include <string_view>

#include "support/safe_text.hpp"

namespace ehelf {

namespace {

constexpr std::string_view kMagic = "!<arch>\n", kThinMagic = "!<thin>\n";
constexpr size_t kHeaderSize = 60;

bool starts_with(std::span<const uint8_t> bytes, std::string_view magic) {
  return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
}

// A header field: its bytes without the spaces ar pads it with.
std::string_view field(const uint8_t* header, size_t at, size_t width) {
  std::string_view f(reinterpret_cast<const char*>(header) + at, width);
  while (!f.empty() && f.back() == ' ')
    f.remove_suffix(1);
  return f;
}

// A decimal field (size, a long name's offset); nullopt when it is not one.
std::optional<uint64_t> decimal(std::string_view f) {
  if (f.empty() || f.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : f) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + uint64_t(c - '0');
  }
  return v;
}

} // namespace

bool is_archive(std::span<const uint8_t> bytes) {
  return starts_with(bytes, kMagic);
}
bool is_thin_archive(std::span<const uint8_t> bytes) {
  return starts_with(bytes, kThinMagic);
}

ArchiveListing read_archive(std::span<const uint8_t> bytes) {
  ArchiveListing out;
  std::span<const uint8_t> long_names; // the "//" member's data
  uint64_t off = kMagic.size();
  auto damage = [&](std::string message) { out.damage = Error::at("", off, std::move(message)); };
  while (off < bytes.size()) {
    if (bytes.size() - off < kHeaderSize) {
      damage(fmt::format("the archive ends inside a member header ({} of {} bytes)",
                         bytes.size() - off, kHeaderSize));
      break;
    }
    const uint8_t* h = bytes.data() + off;
    if (h[58] != '`' || h[59] != '\n') {
      damage("no member header here (its last two bytes are not \"`\\n\")");
      break;
    }
    const std::optional<uint64_t> size = decimal(field(h, 48, 10));
    if (!size) {
      damage(fmt::format("member size '{}' is not a number", message_safe(field(h, 48, 10))));
      break;
    }
    const uint64_t data = off + kHeaderSize;
    if (*size > bytes.size() - data) {
      damage(fmt::format("member of {} bytes runs past the end of the archive ({} left)", *size,
                         bytes.size() - data));
      break;
    }
    std::span<const uint8_t> body = bytes.subspan(data, *size);
    const std::string_view raw = field(h, 0, 16);
    std::string name;
    if (raw == "/" || raw == "/SYM64/") {
      // the symbol index
    } else if (raw == "//") {
      long_names = body;
    } else if (raw.size() > 1 && raw[0] == '/') {
      const std::optional<uint64_t> at = decimal(raw.substr(1));
      if (!at || *at >= long_names.size()) {
        damage(fmt::format("member name '{}' points outside the long-name table ({} bytes)",
                           message_safe(raw), long_names.size()));
        break;
      }
      std::string_view rest(reinterpret_cast<const char*>(long_names.data()) + *at,
                            long_names.size() - *at);
      rest = rest.substr(0, rest.find('\n'));
      if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
      name = rest;
    } else {
      name = raw.substr(0, raw.find('/')); // as readelf reads it (a BSD "#1/LEN" too: "#1")
    }
    if (raw != "/" && raw != "/SYM64/" && raw != "//")
      out.members.push_back({std::move(name), data, body});
    off = data + *size + (*size & 1);
  }
  return out;
}

} // namespace ehelf
