#include "perf/kernel_symbols.hpp"

#include <array>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <sys/utsname.h>
#include <thread>

#include "elf/mapped_file.hpp"
#include "elf/notes.hpp"
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
    if (auto mapped =
            MappedFile::open(fmt::format("{}/[kernel.kallsyms]/{}/kallsyms", buildid_dir, hex));
        mapped && (*mapped)->bytes().size() <= kMaxText) {
      KernelSymbols k;
      k.mapped_ = std::move(*mapped);
      k.parse_text(k.text());
      // A copy truncated while it was read gave zeros for its lost pages: not names to trust.
      if (!k.empty() && !k.mapped_->truncated()) return k;
    }
  }
  return load(recorded_release);
}

KernelSymbols KernelSymbols::parse(std::string_view text) {
  return parse(std::string(text));
}

KernelSymbols KernelSymbols::parse(std::string&& owned) {
  KernelSymbols k;
  k.owned_text_ = std::move(owned);
  k.parse_text(k.owned_text_);
  return k;
}

KernelSymbols::KernelSymbols() = default;
KernelSymbols::KernelSymbols(KernelSymbols&&) noexcept = default;
KernelSymbols& KernelSymbols::operator=(KernelSymbols&&) noexcept = default;
KernelSymbols::~KernelSymbols() = default;

std::string_view KernelSymbols::text() const {
  if (!mapped_) return owned_text_;
  const std::span<const uint8_t> bytes = mapped_->bytes();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

namespace {
// Each byte's value as a hex digit, -1 for the others.
constexpr auto kHexDigit = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (int c = 0; c < 10; ++c)
    t['0' + c] = static_cast<int8_t>(c);
  for (int c = 0; c < 6; ++c)
    t['a' + c] = t['A' + c] = static_cast<int8_t>(10 + c);
  return t;
}();

// Whether the 8 bytes at `p` are hex digits, and their value (the first most significant), a
// word at a time: kallsyms has ~120k lines, parsed while a recording's samples wait for them.
bool hex8(const char* p, uint32_t& value) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  constexpr uint64_t kOnes = 0x0101010101010101, kHigh = 0x8080808080808080;
  // For bytes below 0x80, the high bit of x + 0x80 - lo is set when x >= lo, that of
  // x + 0x7f - hi when x > hi (no carry between bytes).
  auto in_range = [](uint64_t x, uint64_t lo, uint64_t hi) {
    return (x + kOnes * (0x80 - lo)) & ~(x + kOnes * (0x7f - hi)) & kHigh;
  };
  const uint64_t lower = v | kOnes * 0x20;
  if ((v & kHigh) || (in_range(v, '0', '9') | in_range(lower, 'a', 'f')) != kHigh) return false;
  // Digit values (letters have bit 6 set: their low nibble + 9), then pairs, quads, the word.
  uint64_t x = (v & kOnes * 0x0f) + 9 * ((v >> 6) & kOnes);
  x = ((x & 0x0f000f000f000f00) >> 8) | ((x & 0x000f000f000f000f) << 4);
  x = ((x & 0x00ff000000ff0000) >> 16) | ((x & 0x000000ff000000ff) << 8);
  x = ((x & 0x0000ffff00000000) >> 32) | ((x & 0x000000000000ffff) << 16);
  value = static_cast<uint32_t>(x);
  return true;
}
} // namespace

void KernelSymbols::parse_text(std::string_view text) {
  if (text.size() > UINT32_MAX) return; // name offsets are 32-bit (kallsyms is ~10 MB)
  // By hand over the bytes (memchr for line ends): ~120k lines, parsed while a recording's
  // first samples wait for them.
  const char* p = text.data();
  const char* const end = p + text.size();
  symbols_.reserve(text.size() / 40);
  // The high half of the last address read and its 8 digits: the lines share them but for a few
  // changes (kernel, then modules), so most lines convert only their low half.
  uint64_t high_digits = 0;
  uint32_t high = 0;
  bool have_high = false;
  while (p < end) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (!eol) eol = end;
    const char* line = p;
    p = eol + 1;
    // "ffffffff81000000 T _stext" or with a "\t[module]" suffix.
    uint64_t addr = 0;
    const char* q = line;
    bool high_read = false;
    if (eol - line > 16) {
      uint64_t digits;
      std::memcpy(&digits, line, 8);
      if (have_high && digits == high_digits) {
        high_read = true;
      } else {
        have_high = high_read = hex8(line, high);
        high_digits = digits;
      }
    }
    if (uint32_t low; high_read && hex8(line + 8, low)) {
      addr = uint64_t(high) << 32 | low; // the usual line: 16 digits at once
      q = line + 16;
    } else {
      for (; q < eol && q - line < 16; ++q) { // by table: std::from_chars(16) took half the time
        const int8_t digit = kHexDigit[static_cast<unsigned char>(*q)];
        if (digit < 0) break;
        addr = addr << 4 | static_cast<uint64_t>(digit);
      }
    }
    if (q == line || addr == 0) continue; // unparsable, or hidden (kptr_restrict)
    if (eol - q < 4 || q[0] != ' ' || q[2] != ' ') continue;
    const char type = q[1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue; // code only
    // The name ends at the line's end, or at the tab before a module's "\t[module]" (looked for
    // only in lines that end so; memchr per line for a tab and a space took a third of the time).
    const char* name = q + 3;
    const char* name_end = eol;
    if (eol[-1] == ']')
      if (const void* at = std::memchr(name, '\t', static_cast<size_t>(name_end - name)))
        name_end = static_cast<const char*>(at);
    if (name_end == name) continue;
    if (name_end - name == 6 && std::memcmp(name, "_stext", 6) == 0) text_start_ = addr;
    if (name_end - name == 6 && std::memcmp(name, "_etext", 6) == 0) text_end_ = addr;
    symbols_.push_back(
        {addr, static_cast<uint32_t>(name - text.data()), static_cast<uint32_t>(name_end - name)});
  }
  auto by_address = [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; };
  if (!std::is_sorted(symbols_.begin(), symbols_.end(), by_address))
    std::stable_sort(symbols_.begin(), symbols_.end(), by_address);
}

bool KernelSymbols::name(uint64_t addr, std::string_view& name, uint64_t& offset) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                             [](uint64_t a, const Symbol& s) { return a < s.addr; });
  if (it == symbols_.begin()) return false;
  --it;
  name = text().substr(it->name_at, it->name_size);
  offset = addr - it->addr;
  return true;
}

std::string KernelSymbols::running_build_id(const std::string& notes) {
  auto text = read_text_file(notes, size_t(1) << 20);
  if (!text) return {};
  auto id =
      build_id_in_notes(std::span(reinterpret_cast<const uint8_t*>(text->data()), text->size()));
  std::string hex;
  for (uint8_t b : id.value_or(std::span<const uint8_t>{}))
    hex += fmt::format("{:02x}", b);
  return hex;
}

std::future<KernelSymbols> KernelSymbols::load_in_background(std::function<KernelSymbols()> load) {
  auto promise = std::make_shared<std::promise<KernelSymbols>>();
  std::future<KernelSymbols> names = promise->get_future();
  std::thread([promise, load = std::move(load)] { promise->set_value(load()); }).detach();
  return names;
}

} // namespace ehelf::perf
