#include "elf/plt_entries.hpp"

#include <algorithm>
#include <cstring>
#include <elf.h>

namespace ehelf {

namespace {

// The slot of one entry's `jmp *disp32(%rip)` (ff 25), after an endbr64 (f3 0f 1e fa) and a
// bnd prefix (f2) when present; 0 when the entry does not start so.
uint64_t entry_slot(std::span<const uint8_t> entry, uint64_t address) {
  size_t at = 0;
  if (entry.size() >= 4 && entry[0] == 0xf3 && entry[1] == 0x0f && entry[2] == 0x1e &&
      entry[3] == 0xfa)
    at = 4;
  if (at < entry.size() && entry[at] == 0xf2) ++at;
  if (at + 6 > entry.size() || entry[at] != 0xff || entry[at + 1] != 0x25) return 0;
  int32_t disp;
  std::memcpy(&disp, entry.data() + at + 2, 4);
  return address + at + 6 + static_cast<int64_t>(disp);
}

} // namespace

std::vector<PltEntry> plt_entries(const ElfFile& elf) {
  std::vector<PltEntry> out;
  for (const Section& s : elf.sections()) {
    if (!s.name.starts_with(".plt") || s.type != SHT_PROGBITS || !(s.flags & SHF_EXECINSTR))
      continue;
    auto code = elf.section_data(s);
    if (!code) continue;
    const uint64_t size = s.entsize == 8 ? 8 : 16;
    for (uint64_t at = s.name == ".plt" ? size : 0; at + size <= code->size(); at += size)
      if (const uint64_t slot = entry_slot(code->subspan(at, size), s.addr + at))
        out.push_back(PltEntry{s.addr + at, size, slot});
  }
  std::sort(out.begin(), out.end(),
            [](const PltEntry& a, const PltEntry& b) { return a.address < b.address; });
  return out;
}

} // namespace ehelf
