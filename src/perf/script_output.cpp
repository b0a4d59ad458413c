#include "perf/script_output.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ehelf::perf {

namespace {

// perf script's fields, written by hand into a buffer sized for the sample first: this runs once
// per frame of a recording, and fmt's padded formats and buffer appends were half of ehelf perf's
// instructions on a 424 MB recording (callgrind).
class Writer {
public:
  explicit Writer(char* p) : p_(p) {}
  char* end() const { return p_; }

  void put(char c) { *p_++ = c; }
  void put(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void pad(size_t n, char c = ' ') {
    std::memset(p_, c, n);
    p_ += n;
  }
  // `v` in lowercase hex ("%lx"), right-aligned in `width` (at most 16 digits).
  void hex(uint64_t v, size_t width = 0) {
    char digits[16];
    size_t n = 0;
    do {
      digits[15 - n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v);
    if (n < width) pad(width - n);
    put(std::string_view(digits + 16 - n, n));
  }
  enum class Align { Left, Right, Zeros };
  // `v` in decimal (at most 20 digits), padded to `width` as `align` says.
  void dec(uint64_t v, size_t width, Align align) {
    char digits[20];
    const char* last = std::to_chars(digits, digits + sizeof digits, v).ptr;
    const size_t n = static_cast<size_t>(last - digits);
    const size_t fill = n < width ? width - n : 0;
    if (align != Align::Left) pad(fill, align == Align::Zeros ? '0' : ' ');
    put(std::string_view(digits, n));
    if (align == Align::Left) pad(fill);
  }
  // "%5d/%-5d %5lu.%06lu: " (perf script's pid/tid and time): 48 bytes at most.
  void ids_and_time(const SampleStack& s) {
    dec(s.pid, 5, Align::Right);
    put('/');
    dec(s.tid, 5, Align::Left);
    put(' ');
    dec(s.time / 1000000000, 5, Align::Right);
    put('.');
    dec((s.time % 1000000000) / 1000, 6, Align::Zeros);
    put(": ");
  }

private:
  char* p_;
};

constexpr std::string_view kUnknown = "[unknown]";

} // namespace

void write_script(std::ostream& out, const SampleStack& s, const ScriptOptions& o) {
  // An upper bound of the sample's text: the header (comm padded to 16, ids and time, 64 with
  // room to spare), per frame "\t" + 16 hex digits + " " + symbol + "+0x" and 16 digits + " (" +
  // module + ")\n", the stop line and the blank line.
  size_t bound = 16 + s.comm.size() + 64 + s.stop.size() + 32;
  for (const StackFrame& f : s.frames)
    bound += 64 + std::max(f.symbol.size(), kUnknown.size()) +
             std::max(f.module.size(), kUnknown.size());
  thread_local std::vector<char> text; // kept between samples: grown, never shrunk
  if (text.size() < bound) text.resize(std::max(bound, 2 * text.size()));
  Writer w(text.data());
  auto frame_tail = [&](const StackFrame& f) { // " sym (dso)\n"
    w.put(' ');
    if (f.symbol.empty()) {
      w.put(kUnknown);
    } else {
      w.put(f.symbol);
      if (o.offsets) {
        w.put("+0x");
        w.hex(f.symbol_offset);
      }
    }
    w.put(" (");
    w.put(f.module.empty() ? kUnknown : std::string_view(f.module));
    w.put(")\n");
  };
  if (s.ip_only && s.frames.size() == 1 && !o.stop) {
    // perf script's one-line form: "%16s %5d/%-5d %5lu.%06lu: " then " %16lx sym (dso)".
    const StackFrame& f = s.frames.front();
    if (s.comm.size() < 16) w.pad(16 - s.comm.size());
    w.put(s.comm);
    w.put(' ');
    w.ids_and_time(s);
    w.put(' ');
    w.hex(f.pc, 16);
    frame_tail(f);
  } else {
    // perf script's widths: "%s %5d/%-5d %5lu.%06lu: ".
    w.put(s.comm);
    w.put(' ');
    w.ids_and_time(s);
    w.put('\n');
    for (const StackFrame& f : s.frames) {
      w.put('\t');
      w.hex(f.dso_address, 16);
      frame_tail(f);
    }
    if (o.stop) {
      w.put("\t(walk ended: ");
      w.put(s.stop);
      w.put(")\n");
    }
    w.put('\n');
  }
  out.write(text.data(), static_cast<std::streamsize>(w.end() - text.data()));
}

void write_json_line(std::ostream& out, const SampleStack& s) {
  nlohmann::json frames = nlohmann::json::array();
  for (const StackFrame& f : s.frames)
    // Addresses as hex strings: a u64 above 2^53 loses precision as a JSON number in jq and
    // JavaScript.
    frames.push_back({{"pc", fmt::format("{:#x}", f.pc)},
                      {"symbol", f.symbol},
                      {"offset", f.symbol_offset},
                      {"module", f.module}});
  nlohmann::json j = {{"comm", s.comm},
                      {"pid", s.pid},
                      {"tid", s.tid},
                      {"time", s.time},
                      {"period", s.period},
                      {"stop", s.stop},
                      {"frames", std::move(frames)}};
  // Names come from binaries: invalid UTF-8 is replaced rather than thrown on.
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

} // namespace ehelf::perf
