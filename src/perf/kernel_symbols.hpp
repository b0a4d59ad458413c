// KernelSymbols: names for kernel addresses from /proc/kallsyms, used only when the recording was
// made on the running kernel (same release) and the addresses are visible (kptr_restrict).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ehelf::perf {

class KernelSymbols {
public:
  // Reads `path` (/proc/kallsyms format) if `recorded_release` is the running kernel's release
  // (or empty: unknown, assumed to be). Empty when unreadable or all addresses are hidden.
  static KernelSymbols load(std::string_view recorded_release,
                            const std::string& path = "/proc/kallsyms");
  // Parses kallsyms text (tests).
  static KernelSymbols parse(std::string_view text);
  static KernelSymbols parse(std::string&& text);

  bool empty() const { return symbols_.empty(); }
  // The function symbol at or below `addr`; false if none.
  bool name(uint64_t addr, std::string_view& name, uint64_t& offset) const;

private:
  // Names stay in the file's text: one allocation for ~120k symbols instead of one each.
  struct Symbol {
    uint64_t addr;
    uint32_t name_at, name_size; // in text_
  };
  std::string text_;
  std::vector<Symbol> symbols_; // sorted by address (stable: the file's order among equals)
};

} // namespace ehelf::perf
