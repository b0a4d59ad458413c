#include "perf/kernel_symbols.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sys/utsname.h>

namespace ehelf::perf {

KernelSymbols KernelSymbols::load(std::string_view recorded_release, const std::string& path) {
  utsname u{};
  if (!recorded_release.empty() && (::uname(&u) != 0 || recorded_release != u.release)) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0)
    text.append(buf, static_cast<size_t>(in.gcount()));
  return parse(std::move(text));
}

KernelSymbols KernelSymbols::parse(std::string_view text) {
  return parse(std::string(text));
}

KernelSymbols KernelSymbols::parse(std::string&& owned) {
  KernelSymbols k;
  k.text_ = std::move(owned);
  if (k.text_.size() > UINT32_MAX) return {}; // name offsets are 32-bit (kallsyms is ~10 MB)
  std::string_view text = k.text_;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    // "ffffffff81000000 T _stext" or with a "\t[module]" suffix.
    uint64_t addr = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), addr, 16);
    if (ec != std::errc() || addr == 0) continue; // unparsable, or hidden (kptr_restrict)
    std::string_view rest = line.substr(static_cast<size_t>(p - line.data()));
    if (rest.size() < 4 || rest[0] != ' ' || rest[2] != ' ') continue;
    const char type = rest[1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue; // code only
    std::string_view name = rest.substr(3);
    name = name.substr(0, name.find_first_of("\t "));
    if (name.empty()) continue;
    k.symbols_.push_back({addr, static_cast<uint32_t>(name.data() - k.text_.data()),
                          static_cast<uint32_t>(name.size())});
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
