// libFuzzer target: arbitrary bytes registered as the __register_frame family takes them (an
// .eh_frame up to its terminator, or a table of FDE pointers into the bytes, the input's first
// byte chooses), then looked up at every FDE's addresses and at addresses the input names.
// Registering must refuse or accept without reading outside the input, and every lookup must
// answer inside the copy; removal gives the object back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dwarf/cfi_section.hpp"
#include "runtime/registered_frames.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool table = data[0] & 1;
  std::vector<uint8_t> bytes(data + 1, data + size);
  bytes.resize(bytes.size() + 4, 0); // a terminator after the input
  ehelf::RegisteredFrames frames;
  ehelf::RegisteredFrames::Registration r;
  static char object;
  r.object = &object;
  std::vector<const void*> pointers;
  if (table) {
    // FDE pointers at the offsets the input's first 8 bytes name, null-terminated.
    for (size_t i = 0; i < 8 && i < size - 1; ++i)
      pointers.push_back(bytes.data() + (data[1 + i] % bytes.size()));
    pointers.push_back(nullptr);
    r.begin = pointers.data();
    r.table = true;
  } else {
    r.begin = bytes.data();
  }
  (void)frames.add(r);
  ehelf::PointerBases bases;
  bases.section_addr = reinterpret_cast<uint64_t>(bytes.data());
  const ehelf::CfiSection s =
      ehelf::parse_cfi_section(bytes, ehelf::CfiFormat::EhFrame, ".eh_frame", bases);
  std::vector<uint64_t> pcs;
  for (const ehelf::Fde& f : s.fdes)
    if (pcs.size() < 64) pcs.insert(pcs.end(), {f.pc_begin, f.pc_end() - 1, f.pc_end()});
  for (size_t i = 0; i + 8 <= size && pcs.size() < 96; i += 8) {
    uint64_t pc = 0;
    std::memcpy(&pc, data + i, 8);
    pcs.push_back(pc);
  }
  for (uint64_t pc : pcs) {
    const ehelf::Module* m = frames.find(pc);
    if (!m) continue;
    if (pc < m->start || pc >= m->end) std::abort();
    const ehelf::RowLookup* rows = m->data->row_lookup();
    if (!rows) std::abort();
    ehelf::FoundRow row;
    if (rows->find(pc, row) == ehelf::RowStatus::Found && (row.begin > pc || pc >= row.end))
      std::abort();
  }
  if (frames.remove(r.begin) != std::optional<void*>(&object)) std::abort();
  return 0;
}
