#include "perf/kernel_symbols.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <sys/utsname.h>

#include "support/read_text_file.hpp"

namespace ehelf::perf {

KernelSymbols KernelSymbols::load(std::string_view recorded_release, const std::string& path) {
  utsname u{};
  if (!recorded_release.empty() && (::uname(&u) != 0 || recorded_release != u.release)) return {};
  std::optional<std::string> text = read_text_file(path, kMaxText);
  if (!text) return {};
  return parse(std::move(*text));
}

KernelSymbols KernelSymbols::load_for_recording(std::string_view buildid_dir,
                                                std::span<const uint8_t> kernel_build_id,
                                                std::string_view recorded_release) {
  if (!buildid_dir.empty() && !kernel_build_id.empty()) {
    std::string hex;
    for (uint8_t b : kernel_build_id)
      hex += fmt::format("{:02x}", b);
    if (std::optional<std::string> text = read_text_file(
            fmt::format("{}/[kernel.kallsyms]/{}/kallsyms", buildid_dir, hex), kMaxText))
      if (KernelSymbols k = parse(std::move(*text)); !k.empty()) return k;
  }
  return load(recorded_release);
}

KernelSymbols KernelSymbols::parse(std::string_view text) {
  return parse(std::string(text));
}

KernelSymbols KernelSymbols::parse(std::string&& owned) {
  KernelSymbols k;
  k.text_ = std::move(owned);
  if (k.text_.size() > UINT32_MAX) return {}; // name offsets are 32-bit (kallsyms is ~10 MB)
  // By hand over the bytes (memchr for line ends): ~120k lines, parsed while a recording's
  // first samples wait for them.
  const char* p = k.text_.data();
  const char* const end = p + k.text_.size();
  k.symbols_.reserve(k.text_.size() / 40);
  while (p < end) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (!eol) eol = end;
    const char* line = p;
    p = eol + 1;
    // "ffffffff81000000 T _stext" or with a "\t[module]" suffix.
    uint64_t addr = 0;
    const char* q = line;
    for (; q < eol && q - line < 16; ++q) { // std::from_chars(16) took half of the time
      const unsigned c = static_cast<unsigned char>(*q);
      unsigned digit;
      if (c - '0' < 10u)
        digit = c - '0';
      else if ((c | 0x20u) - 'a' < 6u)
        digit = (c | 0x20u) - 'a' + 10;
      else
        break;
      addr = addr << 4 | digit;
    }
    if (q == line || addr == 0) continue; // unparsable, or hidden (kptr_restrict)
    if (eol - q < 4 || q[0] != ' ' || q[2] != ' ') continue;
    const char type = q[1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue; // code only
    const char* name = q + 3;
    const char* name_end = name;
    while (name_end < eol && *name_end != '\t' && *name_end != ' ')
      ++name_end;
    if (name_end == name) continue;
    k.symbols_.push_back({addr, static_cast<uint32_t>(name - k.text_.data()),
                          static_cast<uint32_t>(name_end - name)});
  }
  auto by_address = [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; };
  if (!std::is_sorted(k.symbols_.begin(), k.symbols_.end(), by_address))
    std::stable_sort(k.symbols_.begin(), k.symbols_.end(), by_address);
  return k;
}

bool KernelSymbols::name(uint64_t addr, std::string_view& name, uint64_t& offset) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                             [](uint64_t a, const Symbol& s) { return a < s.addr; });
  if (it == symbols_.begin()) return false;
  --it;
  name = std::string_view(text_).substr(it->name_at, it->name_size);
  offset = addr - it->addr;
  return true;
}

} // namespace ehelf::perf
