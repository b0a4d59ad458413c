// KernelSymbols: names for kernel addresses from /proc/kallsyms, used only when the recording was
// made on the running kernel (same release) and the addresses are visible (kptr_restrict).
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ehelf {
class MappedFile;
}

namespace ehelf::perf {

class KernelSymbols {
public:
  // Reads `path` (/proc/kallsyms format) if `recorded_release` is the running kernel's release
  // (or empty: unknown, assumed to be). Empty when unreadable or all addresses are hidden.
  static KernelSymbols load(std::string_view recorded_release,
                            const std::string& path = "/proc/kallsyms");
  // The names a recording's kernel had: perf record's copy of its kallsyms in the build-id cache
  // (`buildid_dir`/[kernel.kallsyms]/BUILD-ID/kallsyms, as perf script reads it: right after a
  // reboot or on another machine too, and a plain file, mapped rather than read: its ~5 MB
  // copied into fresh memory cost more than parsing it, where /proc/kallsyms is generated line by
  // line), else load(recorded_release).
  static KernelSymbols load_for_recording(std::string_view buildid_dir,
                                          std::span<const uint8_t> kernel_build_id,
                                          std::string_view recorded_release);
  // `load()` run in the background (its ~100,000 lines take a while), on a detached thread that
  // owns what it reads: a caller that never asks for the names does not wait for them when it
  // ends, as it would for std::async's future.
  static std::future<KernelSymbols> load_in_background(std::function<KernelSymbols()> load);
  // The largest kallsyms text read (a real one is ~5-10 MB).
  static constexpr size_t kMaxText = size_t(256) << 20;
  // Parses kallsyms text (tests).
  static KernelSymbols parse(std::string_view text);
  static KernelSymbols parse(std::string&& text);
  KernelSymbols();
  KernelSymbols(KernelSymbols&&) noexcept;
  KernelSymbols& operator=(KernelSymbols&&) noexcept;
  ~KernelSymbols();

  bool empty() const { return symbols_.empty(); }
  size_t size() const { return symbols_.size(); } // code symbols read
  // The function symbol at or below `addr`; false if none.
  bool name(uint64_t addr, std::string_view& name, uint64_t& offset) const;
  // The kernel image's code, [_stext, _etext) (modules lie elsewhere); {0, 0} without both.
  std::pair<uint64_t, uint64_t> text_range() const {
    return text_start_ && text_end_ > text_start_ ? std::pair{text_start_, text_end_}
                                                  : std::pair<uint64_t, uint64_t>{0, 0};
  }
  // The running kernel's build id (hex of its NT_GNU_BUILD_ID note, from `notes`: the kernel's
  // notes section as /sys/kernel/notes shows it); empty when unreadable.
  static std::string running_build_id(const std::string& notes = "/sys/kernel/notes");

private:
  // Names stay in the file's text: one allocation for ~120k symbols instead of one each.
  struct Symbol {
    uint64_t addr;
    uint32_t name_at, name_size; // in text()
  };
  // Parses `text`, which mapped_ or owned_text_ holds.
  void parse_text(std::string_view text);
  std::string_view text() const;
  std::unique_ptr<MappedFile> mapped_; // the text when it was mapped, else
  std::string owned_text_;             // the text read
  std::vector<Symbol> symbols_;        // sorted by address (stable: the file's order among equals)
  uint64_t text_start_ = 0, text_end_ = 0; // _stext, _etext
};

} // namespace ehelf::perf
