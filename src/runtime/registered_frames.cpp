#include "runtime/registered_frames.hpp"

#include <algorithm>
#include <cstring>

#include "dwarf/cfi_section.hpp"
#include "dwarf/eh_frame_hdr.hpp"
#include "dwarf/pointer_encoding.hpp"
#include "runtime/memory.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf {

struct RegisteredFrames::Slot {
  Module module;
  ModuleData data;
  std::vector<uint8_t> bytes; // the registered records, copied
  const void* begin = nullptr;
  void* object = nullptr;
  bool live = false; // registered (not in free_)
};

namespace {

// This process's memory read a page at a time (process_vm_readv: an unmapped page fails the
// read, never faults), the last pages read kept: the records of a registration (an FDE, its
// CIE, the region holding both) mostly lie in one page, read once instead of once per field.
class OwnPages {
public:
  bool read(uint64_t addr, void* out, size_t size) {
    if (size > kPages * kPage) return read_own_memory(addr, out, size);
    auto* to = static_cast<uint8_t*>(out);
    while (size) {
      const uint64_t page = addr & ~(kPage - 1);
      const uint8_t* bytes = page_at(page);
      if (!bytes) return false;
      const size_t n = std::min<uint64_t>(size, page + kPage - addr);
      std::memcpy(to, bytes + (addr - page), n);
      to += n, addr += n, size -= n;
    }
    return true;
  }

private:
  static constexpr uint64_t kPage = 4096;
  static constexpr size_t kPages = 4;
  const uint8_t* page_at(uint64_t page) {
    for (size_t i = 0; i < kPages; ++i)
      if (held_[i] && at_[i] == page) return bytes_.data() + i * kPage;
    const size_t i = next_++ % kPages;
    uint8_t* bytes = bytes_.data() + i * kPage;
    held_[i] = read_own_memory(page, bytes, kPage);
    at_[i] = page;
    return held_[i] ? bytes : nullptr;
  }
  std::vector<uint8_t> bytes_ = std::vector<uint8_t>(kPages * kPage); // (16 KiB: not the stack)
  uint64_t at_[kPages] = {};
  bool held_[kPages] = {};
  size_t next_ = 0;
};

// One .eh_frame record at `addr` in this process: its whole size (length field included), 0 for
// the terminator; false if it cannot be read.
bool record_size(OwnPages& memory, uint64_t addr, uint64_t& size) {
  uint32_t length = 0;
  if (!memory.read(addr, &length, 4)) return false;
  if (length != 0xffffffff) {
    size = length ? 4 + uint64_t(length) : 0;
    return true;
  }
  uint64_t extended = 0;
  if (!memory.read(addr + 4, &extended, 8) || extended > RegisteredFrames::kMaxBytes) return false;
  size = 12 + extended;
  return true;
}

// The records of an .eh_frame at `begin`, up to its terminator (or the limit), read a page at a
// time (a JIT's object is a few hundred bytes: one system call): what lies in the same page as a
// byte that can be read can be read too.
std::optional<std::vector<uint8_t>> copy_section(uint64_t begin) {
  constexpr uint64_t kPage = 4096;
  std::vector<uint8_t> bytes;
  // Reads up to the end of the page holding byte `need - 1` of the section.
  auto have = [&](uint64_t need) {
    if (need <= bytes.size()) return true;
    if (need > RegisteredFrames::kMaxBytes) return false;
    const uint64_t end = ((begin + need + kPage - 1) & ~(kPage - 1)) - begin;
    const size_t old = bytes.size();
    bytes.resize(end);
    if (read_own_memory(begin + old, bytes.data() + old, end - old)) return true;
    bytes.resize(old);
    return false;
  };
  uint64_t at = 0;
  for (;;) {
    uint32_t length = 0;
    if (!have(at + 4)) return std::nullopt; // no terminator before unreadable memory
    std::memcpy(&length, bytes.data() + at, 4);
    if (length == 0) break;
    uint64_t size = 4 + uint64_t(length);
    if (length == 0xffffffff) {
      uint64_t extended = 0;
      if (!have(at + 12)) return std::nullopt;
      std::memcpy(&extended, bytes.data() + at + 4, 8);
      if (extended > RegisteredFrames::kMaxBytes) return std::nullopt;
      size = 12 + extended;
    }
    if (!have(at + size)) return std::nullopt;
    at += size;
  }
  if (at == 0) return std::nullopt;
  bytes.resize(at);
  return bytes;
}

// An FDE's size and where its CIE is (the CIE pointer is the distance back from its own field),
// in one read. 64-bit FDEs are not taken (fde_at reads 32-bit ones only).
bool fde_header(OwnPages& memory, uint64_t fde, uint64_t& size, uint64_t& cie) {
  uint32_t words[2] = {};
  if (!memory.read(fde, words, sizeof words)) return false;
  const uint32_t length = words[0], id = words[1];
  if (length == 0 || length == 0xffffffff || id == 0 || id > fde + 4) return false;
  size = 4 + uint64_t(length);
  cie = fde + 4 - id;
  return true;
}

struct FoundFde {
  uint64_t offset = 0; // within the copy
  uint64_t pc_begin = 0, pc_range = 0;
};

struct CieEncodings {
  uint64_t cie = UINT64_MAX; // the CIE last read (its offset)
  uint8_t encoding = 0;      // its FDE pointer encoding
  bool read(std::span<const uint8_t> bytes, uint64_t cie, const PointerBases& bases);
};

// The FDE at `offset` of `bytes` (a region holding it and its CIE): its range, read with the
// CIE's pointer encoding.
std::optional<FoundFde> fde_at(std::span<const uint8_t> bytes, uint64_t offset,
                               const PointerBases& bases, CieEncodings& cies) {
  ByteCursor c(bytes.subspan(offset), offset);
  const uint32_t length = c.u32();
  if (!c.ok() || length == 0 || length == 0xffffffff) return std::nullopt; // (no 64-bit FDEs)
  const uint64_t id_at = c.offset();
  const uint32_t id = c.u32();
  if (!c.ok() || id == 0 || id > id_at) return std::nullopt;
  const uint64_t cie = id_at - id;
  FoundFde f;
  f.offset = offset;
  if (cies.cie != cie) {
    if (!cies.read(bytes, cie, bases)) return std::nullopt;
  }
  if (!read_encoded_pointer(c, cies.encoding & 0x7f, bases, f.pc_begin) ||
      !read_encoded_pointer(c, cies.encoding & 0x0f, PointerBases{}, f.pc_range))
    return std::nullopt;
  return f;
}

// The FDE pointer encoding of the CIE at `cie` in `bytes` (the last one read: FDEs mostly share
// one).
bool CieEncodings::read(std::span<const uint8_t> bytes, uint64_t cie, const PointerBases& bases) {
  // The CIE alone, parsed as a section of one entry at its own address.
  ByteCursor l(bytes.subspan(cie), cie);
  const uint32_t cie_length = l.u32();
  if (!l.ok() || cie_length == 0 || cie_length == 0xffffffff || cie_length > bytes.size() - cie - 4)
    return false;
  PointerBases at_cie = bases;
  at_cie.section_addr = bases.section_addr + cie;
  const CfiSection one = parse_cfi_section(bytes.subspan(cie, 4 + cie_length), CfiFormat::EhFrame,
                                           ".eh_frame", at_cie);
  if (one.cies.size() != 1) return false;
  this->cie = cie;
  encoding = one.cies[0].fde_encoding;
  return true;
}

// The FDEs at `fdes` (addresses in the program): the region holding them and their CIEs is
// copied into `bytes` from `region`; their ranges.
std::vector<FoundFde> fdes_at(const std::vector<uint64_t>& fdes, const PointerBases& given,
                              std::vector<uint8_t>& bytes, uint64_t& region) {
  std::vector<uint64_t> kept;
  uint64_t low = UINT64_MAX, high = 0;
  OwnPages memory;
  for (const uint64_t fde : fdes) {
    uint64_t cie = 0, fde_size = 0, cie_size = 0;
    if (!fde_header(memory, fde, fde_size, cie) || !record_size(memory, cie, cie_size)) continue;
    low = std::min({low, fde, cie});
    high = std::max({high, fde + fde_size, cie + cie_size});
    kept.push_back(fde);
  }
  if (kept.empty() || high - low > RegisteredFrames::kMaxBytes) return {};
  bytes.resize(high - low);
  if (!memory.read(low, bytes.data(), bytes.size())) return {};
  region = low;
  PointerBases bases = given;
  bases.section_addr = low;
  std::vector<FoundFde> found;
  CieEncodings cies;
  for (const uint64_t fde : kept)
    if (auto f = fde_at(bytes, fde - low, bases, cies)) found.push_back(*f);
  return found;
}

// The FDEs of a section copied into `bytes` from `section`, all of whose CIEs are in it; false
// when one is not (an FDE registered alone, as LLVM's JIT registers them for LLVM's libunwind,
// whose CIE is before it): `outside` then lists every FDE's address.
bool fdes_in_section(std::span<const uint8_t> bytes, uint64_t section, const PointerBases& given,
                     std::vector<FoundFde>& found, std::vector<uint64_t>& outside) {
  PointerBases bases = given;
  bases.section_addr = section;
  bool inside = true;
  CieEncodings cies;
  for (uint64_t at = 0; at + 8 <= bytes.size();) {
    uint32_t length = 0, id = 0;
    std::memcpy(&length, bytes.data() + at, 4);
    if (length == 0xffffffff) break; // (no 64-bit entries: copy_section measured their size)
    std::memcpy(&id, bytes.data() + at + 4, 4);
    if (id != 0) {
      outside.push_back(section + at);
      if (id > at + 4) {
        inside = false;
      } else if (inside) {
        if (auto f = fde_at(bytes, at, bases, cies)) found.push_back(*f);
      }
    }
    at += 4 + uint64_t(length);
  }
  return inside;
}

// A table registration's FDE addresses (null-terminated pointers at `table`).
std::vector<uint64_t> table_entries(uint64_t table) {
  std::vector<uint64_t> fdes;
  OwnPages memory; // (a page read per 512 pointers, not a system call per pointer)
  for (uint64_t i = 0; i < RegisteredFrames::kMaxTableEntries; ++i) {
    uint64_t fde = 0;
    if (!memory.read(table + 8 * i, &fde, 8) || fde == 0) break;
    fdes.push_back(fde);
  }
  return fdes;
}

} // namespace

RegisteredFrames::RegisteredFrames(bool process_wide) : process_wide_(process_wide) {}
RegisteredFrames::~RegisteredFrames() = default;

bool RegisteredFrames::add(const Registration& r) {
  const auto begin = reinterpret_cast<uint64_t>(r.begin);
  if (!begin) return false;
  PointerBases bases;
  bases.text_base = r.text_base;
  bases.data_base = r.data_base;
  std::vector<uint8_t> bytes;
  std::vector<FoundFde> fdes;
  uint64_t section = begin; // where the copy's first byte is in the program
  if (r.table) {
    fdes = fdes_at(table_entries(begin), bases, bytes, section);
  } else if (auto copied = copy_section(begin)) {
    std::vector<uint64_t> every;
    if (fdes_in_section(*copied, begin, bases, fdes, every))
      bytes = std::move(*copied);
    else
      fdes = fdes_at(every, bases, bytes, section);
  }
  std::vector<EhFrameHdr::Entry> entries;
  std::vector<Range> ranges;
  uint64_t low = UINT64_MAX, high = 0;
  for (const FoundFde& f : fdes) {
    if (f.pc_range == 0 || f.pc_begin == 0 || f.pc_begin + f.pc_range < f.pc_begin) continue;
    entries.push_back({f.pc_begin, section + f.offset});
    ranges.push_back({f.pc_begin, f.pc_begin + f.pc_range, nullptr});
    low = std::min(low, f.pc_begin);
    high = std::max(high, f.pc_begin + f.pc_range);
  }
  // The search table, placed at the copy's address in the program (as a made table is placed at
  // its section's): wide entries when the code is more than 2 GiB from its FDEs.
  std::optional<std::vector<uint8_t>> hdr;
  if (!entries.empty())
    hdr = encode_eh_frame_hdr(std::move(entries), section, section, SearchTableWidth::WideIfNeeded);

  const std::lock_guard<std::mutex> hold(writers_);
  Slot* slot = nullptr;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slots_.push_back(std::make_unique<Slot>());
    slot = slots_.back().get();
  }
  // Registered even when nothing in it can be unwound: its removal gives back its object.
  slot->live = true;
  slot->begin = r.begin;
  slot->object = r.object;
  slot->bytes = std::move(bytes);
  slot->data.made_hdr = hdr ? std::move(*hdr) : std::vector<uint8_t>{};
  slot->data.loaded = {};
  slot->data.loaded.eh_frame = section; // _Unwind_Find_FDE answers in the program's copy
  slot->data.loaded.end = section + slot->bytes.size();
  const bool usable =
      hdr && slot->data.rows.init(CfiImage{slot->data.made_hdr, section, slot->bytes, section});
  slot->module.path = "[registered frames]";
  slot->module.start = usable ? low : 0;
  slot->module.end = usable ? high : 0;
  slot->module.bias = 0;
  // Not owned: the slot outlives every walk (an empty owner, aliasing the slot's data).
  slot->module.data = std::shared_ptr<const ModuleData>(std::shared_ptr<void>(), &slot->data);
  if (usable) {
    for (Range& range : ranges)
      range.slot = slot;
    const auto by_start = [](const Range& a, const Range& b) { return a.start < b.start; };
    std::stable_sort(ranges.begin(), ranges.end(), by_start);
    const size_t old = ranges_.size();
    ranges_.insert(ranges_.end(), ranges.begin(), ranges.end());
    std::inplace_merge(ranges_.begin(), ranges_.begin() + std::ptrdiff_t(old), ranges_.end(),
                       by_start);
  }
  publish();
  return usable;
}

std::optional<void*> RegisteredFrames::remove(const void* begin) {
  const std::lock_guard<std::mutex> hold(writers_);
  // A registration of `begin` (one registered twice is removed twice).
  Slot* slot = nullptr;
  for (const auto& s : slots_)
    if (s->live && s->begin == begin) slot = s.get();
  if (!slot) return std::nullopt;
  std::erase_if(ranges_, [slot](const Range& r) { return r.slot == slot; });
  publish();
  void* object = slot->object;
  slot->live = false;
  slot->begin = nullptr;
  slot->object = nullptr;
  free_.push_back(slot);
  return object;
}

void RegisteredFrames::publish() {
  Index* next = spare_;
  if (!next || next->capacity < ranges_.size()) {
    const size_t capacity = std::max<size_t>(64, 2 * ranges_.size());
    indexes_.push_back(std::make_unique<Index>(capacity));
    next = indexes_.back().get();
  }
  // Lookups that read `next` when it was current, and still do, see its sequence change. No
  // fences (ThreadSanitizer has none): the odd count is an acquire-release exchange, which no
  // later store passes; each entry is stored with release, so that a lookup's acquire load of
  // an entry written here also sees the odd count when it reads the count again.
  const uint64_t s = next->sequence.fetch_add(1, std::memory_order_acq_rel);
  for (size_t i = 0; i < ranges_.size(); ++i) {
    next->entries[i].start.store(ranges_[i].start, std::memory_order_release);
    next->entries[i].end.store(ranges_[i].end, std::memory_order_release);
    next->entries[i].slot.store(ranges_[i].slot, std::memory_order_release);
  }
  next->count.store(ranges_.size(), std::memory_order_release);
  next->sequence.store(s + 2, std::memory_order_release);
  spare_ = current_.exchange(next, std::memory_order_acq_rel);
  registered_ranges_.store(ranges_.size(), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  if (process_wide_) g_registered_frames_generation.fetch_add(1, std::memory_order_release);
}

const Module* RegisteredFrames::find(uint64_t pc) const {
  if (registered_ranges_.load(std::memory_order_acquire) == 0) return nullptr; // none
  // Retried only when a writer rewrote the index read meanwhile (two registrations or removals
  // during one lookup); bounded all the same.
  for (int attempt = 0; attempt < 100000; ++attempt) {
    const Index* index = current_.load(std::memory_order_acquire);
    if (!index) return nullptr;
    const uint64_t before = index->sequence.load(std::memory_order_acquire);
    if (before & 1) continue; // no longer current: being rewritten
    size_t n = std::min(index->count.load(std::memory_order_acquire), index->capacity);
    const Slot* found = nullptr;
    const Index::Entry* e = index->entries.get();
    if (n && e[0].start.load(std::memory_order_acquire) <= pc) {
      size_t lo = 0; // the last range starting at or below pc
      while (n > 1) {
        const size_t half = n / 2;
        if (e[lo + half].start.load(std::memory_order_acquire) <= pc) lo += half;
        n -= half;
      }
      if (pc < e[lo].end.load(std::memory_order_acquire))
        found = e[lo].slot.load(std::memory_order_acquire);
    }
    // (the entries' acquire loads keep this read after them)
    if (index->sequence.load(std::memory_order_relaxed) == before)
      return found ? &found->module : nullptr;
  }
  return nullptr;
}

size_t RegisteredFrames::size() const {
  const std::lock_guard<std::mutex> hold(writers_);
  return slots_.size() - free_.size();
}

RegisteredFrames& registered_frames() {
  // Never destroyed: walks in other threads' exit paths may still look up.
  static RegisteredFrames* frames = new RegisteredFrames(true);
  return *frames;
}

} // namespace ehelf
