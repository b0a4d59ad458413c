#include "runtime/module_map.hpp"

#include "runtime/proc_files.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <elf.h>
#include <fmt/format.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dwarf/module_cfi.hpp"
#include "eh_elf/eh_elf_cache.hpp"
#include "runtime/memory.hpp"

namespace ehelf {
namespace {

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

struct IterateState {
  std::vector<Module>* out;
  uint64_t adds = 0, subs = 0;
};

int on_phdr(dl_phdr_info* info, size_t, void* arg) {
  auto* st = static_cast<IterateState*>(arg);
  st->adds = info->dlpi_adds;
  st->subs = info->dlpi_subs;
  uint64_t vdso = ::getauxval(AT_SYSINFO_EHDR);
  bool is_vdso = false;
  uint64_t image_lo = UINT64_MAX, image_hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_LOAD) continue;
    uint64_t lo = info->dlpi_addr + p.p_vaddr;
    image_lo = std::min(image_lo, lo);
    image_hi = std::max(image_hi, lo + p.p_memsz);
    if (lo == vdso) is_vdso = true;
  }
  // The search table of the loaded image, and the end of the segment that holds it (the end
  // of .eh_frame is not recorded anywhere a loaded image keeps).
  uint64_t cfi_hdr = 0, cfi_hdr_size = 0, cfi_segment_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_GNU_EH_FRAME) continue;
    for (int j = 0; j < info->dlpi_phnum; ++j) {
      const ElfW(Phdr)& l = info->dlpi_phdr[j];
      if (l.p_type == PT_LOAD && p.p_vaddr >= l.p_vaddr &&
          p.p_vaddr + p.p_memsz <= l.p_vaddr + l.p_filesz) {
        cfi_hdr = info->dlpi_addr + p.p_vaddr;
        cfi_hdr_size = p.p_memsz;
        cfi_segment_end = info->dlpi_addr + l.p_vaddr + l.p_filesz;
      }
    }
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_LOAD || !(p.p_flags & PF_X)) continue;
    Module m;
    m.path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : self_exe();
    m.bias = info->dlpi_addr;
    m.start = info->dlpi_addr + p.p_vaddr;
    m.end = m.start + p.p_memsz;
    m.cfi_hdr = cfi_hdr;
    m.cfi_hdr_size = cfi_hdr_size;
    m.cfi_segment_end = cfi_segment_end;
    if (is_vdso) {
      m.vdso = true;
      m.path = "[vdso]";
      m.image_addr = image_lo;
      // The vDSO's section headers lie past its PT_LOAD extent but inside its last mapped page:
      // include them (they locate .eh_frame), never reading beyond that page.
      uint64_t size = image_hi - image_lo;
      uint64_t mapped = ((image_hi + 4095) & ~uint64_t(4095)) - image_lo;
      const auto* ehdr = reinterpret_cast<const ElfW(Ehdr)*>(image_lo);
      uint64_t with_sections = ehdr->e_shoff + uint64_t(ehdr->e_shnum) * ehdr->e_shentsize;
      if (with_sections > size && with_sections <= mapped) size = with_sections;
      m.image_size = size;
    }
    st->out->push_back(std::move(m));
  }
  return 0;
}

} // namespace

ModuleMap ModuleMap::for_self() {
  ModuleMap map;
  IterateState st{&map.modules_};
  ::dl_iterate_phdr(on_phdr, &st);
  map.adds_ = st.adds;
  map.subs_ = st.subs;
  map.finish();
  return map;
}

bool ModuleMap::stale_for_self() const {
  struct Counters {
    uint64_t adds = 0, subs = 0;
  } c;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        auto* c = static_cast<Counters*>(arg);
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
        return 1; // the counters are the same in every entry: stop at the first
      },
      &c);
  return c.adds != adds_ || c.subs != subs_;
}

Result<ModuleMap> ModuleMap::for_process(int pid) {
  auto mappings = read_proc_maps(pid, true);
  if (!mappings) return Error::plain(fmt::format("cannot read /proc/{}/maps", pid));
  ModuleMap map;
  for (const ProcMapping& pm : *mappings) {
    Module m;
    m.start = pm.start;
    m.end = pm.end;
    if (pm.path == "[vdso]") {
      m.vdso = true;
      m.path = pm.path;
      m.image_addr = pm.start; // the vDSO image starts at its first (executable) page
      m.image_size = pm.end - pm.start;
      m.bias = pm.start; // vDSO SVMAs are offsets from its start (it is linked at 0)
      map.modules_.push_back(std::move(m));
      continue;
    }
    if (pm.path.empty() || pm.path[0] != '/') continue; // anonymous or JIT code: no module
    // A file deleted since it was mapped (`./prog & rm prog`, an upgraded library) is still
    // readable through the mapping's /proc/PID/map_files entry (for a tracer of the process).
    if (pm.deleted()) m.open_path = pm.open_path(pid);
    // The SVMA of `start` is the vaddr of the PT_LOAD segment holding file offset `offset`.
    auto elf = m.open_path.empty() ? ElfFile::open(fmt::format("/proc/{}/root{}", pid, pm.path))
                                   : ElfFile::open(m.open_path);
    if (!elf && m.open_path.empty()) elf = ElfFile::open(pm.path);
    if (!elf) continue;
    if (auto bias = load_bias(**elf, pm.start, pm.offset)) m.bias = *bias;
    m.path = pm.path;
    map.modules_.push_back(std::move(m));
  }
  map.finish();
  return map;
}

std::optional<uint64_t> load_bias(const ElfFile& elf, uint64_t map_start, uint64_t file_offset) {
  return load_bias(elf.segments(), map_start, file_offset);
}

std::optional<uint64_t> load_bias(std::span<const Segment> segments, uint64_t map_start,
                                  uint64_t file_offset) {
  for (const Segment& s : segments)
    if (s.type == PT_LOAD && file_offset >= s.offset &&
        file_offset < s.offset + std::max<uint64_t>(s.filesz, 1))
      return map_start - (s.vaddr + (file_offset - s.offset));
  return std::nullopt;
}

uint64_t ModuleMap::Generation::next() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

const Module* ModuleMap::find_unlisted(uint64_t pc) const {
  if (registered_)
    if (const Module* m = registered_->find(pc)) return m;
  return late_ ? late_->find(pc) : nullptr;
}

void ModuleMap::finish() {
  generation_.renew();
  std::sort(modules_.begin(), modules_.end(),
            [](const Module& a, const Module& b) { return a.start < b.start; });
  spans_.clear();
  for (const Module& m : modules_)
    spans_.emplace_back(m.start, m.end);
}

namespace {
// The module's eh_elf from the cache, if one was compiled for its build id.
void load_compiled(const ElfFile& elf, ModuleData& data) {
  if (auto id = elf.build_id()) data.compiled = load_cached_eh_elf(*id, RegisterSet::Minimal);
}
} // namespace

namespace {
// Rows found on demand through a search table made from the file's .eh_frame (a module linked
// without .eh_frame_hdr, or whose header lists no FDE). False when none can be made.
bool rows_from_made_table(const ElfFile& f, ModuleData& data) {
  auto made = make_search_table(f);
  if (!made) return false;
  data.made_hdr = std::move(made->hdr);
  return data.rows.init(
      CfiImage{data.made_hdr, made->hdr_addr, made->eh_frame, made->eh_frame_addr});
}

// Fills `data` from a parsed ELF (or records why it could not be read).
void load_elf(Result<std::unique_ptr<ElfFile>> elf, const LoadPolicy& policy, ModuleData& data) {
  if (!elf) {
    data.error = elf.error().to_string();
    return;
  }
  if (!policy.whole_table) { // rows on demand where the file has a search table
    const ElfFile& f = **elf;
    const Section* hdr = f.find_section(".eh_frame_hdr");
    const Section* eh = f.find_section(".eh_frame");
    if (hdr && eh && hdr->type != SHT_NOBITS && eh->type != SHT_NOBITS)
      if (auto h = f.section_data(*hdr), e = f.section_data(*eh); h && e)
        data.rows.init(CfiImage{*h, hdr->addr, *e, eh->addr});
    if (!data.rows.usable()) rows_from_made_table(f, data);
  }
  if (data.has_rows()) {
    if (policy.compiled) load_compiled(**elf, data);
    if (policy.symbols) data.elf = std::move(*elf);
    return;
  }
  LoadOptions lo;
  lo.debug_frame = policy.debug_frame;
  lo.separate_eh_frame = true;
  lo.debug_dirs = policy.extra_debug_dirs;
  lo.debug_dirs.push_back(kSystemDebugDir);
  auto cfi = load_module_cfi(std::move(*elf), lo);
  if (!cfi) {
    data.error = cfi.error().to_string();
    return;
  }
  auto table = build_unwind_table(*cfi);
  if (!table)
    data.error = table.error().to_string();
  else
    data.table = std::move(*table);
  if (data.table && policy.compact) add_compact_table(data);
  if (data.table && policy.compiled) load_compiled(*cfi->elf, data);
  if (policy.symbols) data.elf = std::move(cfi->elf);
}
} // namespace

std::shared_ptr<const ModuleData> load_module(const std::string& path, const LoadPolicy& policy) {
  auto data = std::make_shared<ModuleData>();
  load_elf(ElfFile::open(path), policy, *data);
  return data;
}

std::shared_ptr<const ModuleData>
load_module_image(std::vector<uint8_t> image, const std::string& name, const LoadPolicy& policy) {
  auto data = std::make_shared<ModuleData>();
  data->image = std::move(image); // the ELF refers to these bytes: they live with the data
  load_elf(ElfFile::parse(data->image, name), policy, *data);
  return data;
}

const ModuleData& ModuleMap::load(const Module& m, const LoadPolicy& policy, MemoryReader* memory) {
  if (m.data) return *m.data;
  // Modules sharing a file (several executable segments) share one data object.
  for (const Module& other : modules_)
    if (&other != &m && other.data && other.path == m.path && other.bias == m.bias) {
      m.data = other.data;
      return *m.data;
    }
  if (!m.vdso) {
    m.data = load_module(m.open_path.empty() ? m.path : m.open_path, policy);
    return *m.data;
  }
  std::vector<uint8_t> image(m.image_size);
  bool ok = false;
  if (memory)
    ok = memory->read(m.image_addr, image.data(), image.size());
  else if (m.image_addr == ::getauxval(AT_SYSINFO_EHDR)) {
    std::memcpy(image.data(), reinterpret_cast<const void*>(m.image_addr), m.image_size);
    ok = true;
  }
  if (ok) {
    m.data = load_module_image(std::move(image), "[vdso]", policy);
  } else {
    auto data = std::make_shared<ModuleData>();
    data->error = "not loaded";
    m.data = data;
  }
  return *m.data;
}

void find_rows_in_memory(const Module& m, ModuleData& data) {
  if (!m.cfi_hdr || m.cfi_segment_end <= m.cfi_hdr || m.cfi_hdr_size < 4) return;
  uint8_t start[32] = {}; // the header up to its table, read without trusting the mapping
  const size_t n = std::min<uint64_t>(sizeof start, m.cfi_hdr_size);
  if (!read_own_memory(m.cfi_hdr, start, n)) return;
  auto eh_frame = RowLookup::eh_frame_address({start, n}, m.cfi_hdr - m.bias);
  if (!eh_frame) return;
  // A header without a search table (GNU ld writes one when it cannot parse an input's
  // .eh_frame): rows_from_file instead.
  if (!RowLookup::has_search_table({start, n}, m.cfi_hdr - m.bias, m.cfi_hdr_size)) return;
  const uint64_t at = *eh_frame + m.bias; // AVMA
  // Linkers put .eh_frame after .eh_frame_hdr in one segment: anything else is not read.
  if (at < m.cfi_hdr + m.cfi_hdr_size || at >= m.cfi_segment_end) return;
  data.loaded = ModuleData::LoadedCfi{m.cfi_hdr, m.cfi_hdr_size, at, m.cfi_segment_end, m.bias};
}

namespace {

// A copy of a loaded module's [.eh_frame_hdr, end of .eh_frame's segment), filled a page at a
// time with process_vm_readv when a lookup first reads the page (CfiImage::fill): a walk costs
// the pages it touches, not the whole section, and a page of a library unmapped meanwhile fails
// to copy instead of faulting. Lives at the head of its own mapping, followed by a bitmap of
// the pages copied and the copy; never unmapped once published.
struct LoadedCopy {
  RowLookup lookup;
  uint64_t source = 0; // AVMA of the first byte
  uint64_t size = 0;
  uint8_t* bytes = nullptr;
  std::atomic<uint64_t>* copied = nullptr; // bit per page of `bytes`

  static constexpr uint64_t kPage = 4096;
  static bool fill(const void* context, const uint8_t* p, size_t n) {
    const auto* c = static_cast<const LoadedCopy*>(context);
    const uint64_t from = static_cast<uint64_t>(p - c->bytes);
    if (n == 0) return true;
    if (from >= c->size || c->size - from < n) return false;
    for (uint64_t page = from / kPage; page <= (from + n - 1) / kPage; ++page) {
      std::atomic<uint64_t>& word = c->copied[page / 64];
      const uint64_t bit = uint64_t(1) << (page % 64);
      if (word.load(std::memory_order_acquire) & bit) continue;
      // Two threads may copy one page at once: they write the same bytes.
      const uint64_t at = page * kPage, len = std::min(kPage, c->size - at);
      if (!read_own_memory(c->source + at, c->bytes + at, len)) return false;
      word.fetch_or(bit, std::memory_order_release);
    }
    return true;
  }
};

} // namespace

const RowLookup* ModuleData::copy_loaded_rows() const {
  static const RowLookup kNone; // published when no copy can be made: no retry
  const LoadedCfi& l = loaded;
  const uint64_t size = l.end - l.hdr;
  const uint64_t pages = (size + LoadedCopy::kPage - 1) / LoadedCopy::kPage;
  const uint64_t head = (sizeof(LoadedCopy) + 63) & ~uint64_t(63);
  const uint64_t bitmap =
      ((pages + 63) / 64 * 8 + LoadedCopy::kPage - 1) & ~(LoadedCopy::kPage - 1);
  const uint64_t lead = (head + LoadedCopy::kPage - 1) & ~(LoadedCopy::kPage - 1);
  const uint64_t total = lead + bitmap + pages * LoadedCopy::kPage;
  const RowLookup* made = &kNone;
  void* p = MAP_FAILED;
  if (size <= kMaxLoadedCopy)
    p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
  if (p != MAP_FAILED) {
    auto* base = static_cast<uint8_t*>(p);
    auto* copy = new (p) LoadedCopy;
    copy->source = l.hdr;
    copy->size = size;
    copy->copied = reinterpret_cast<std::atomic<uint64_t>*>(base + lead); // zero: none copied
    copy->bytes = base + lead + bitmap;
    CfiImage img{{copy->bytes, l.hdr_size},
                 l.hdr - l.bias,
                 {copy->bytes + (l.eh_frame - l.hdr), l.end - l.eh_frame},
                 l.eh_frame - l.bias};
    img.fill = &LoadedCopy::fill;
    img.fill_context = copy;
    if (copy->lookup.init(img))
      made = &copy->lookup;
    else
      ::munmap(p, total);
  }
  const RowLookup* expected = nullptr;
  if (!loaded_rows_.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
    if (made != &kNone) ::munmap(const_cast<RowLookup*>(made), total); // another thread's won
    made = expected;
  }
  return made->usable() ? made : nullptr;
}

void add_compact_table(ModuleData& data) {
  data.compact = CompactTable(*data.table);
  data.hot.reserve(data.compact.rules());
  for (uint32_t i = 0; i < data.compact.rules(); ++i)
    data.hot.push_back(hot_form(data.compact.rule(i)));
}

namespace {
// A loaded module without a usable search table in memory: rows through one made from its
// file's .eh_frame, if the file holds what is loaded (the section's first bytes are those in
// memory). The file stays mapped with the data. Opens and parses: outside signal handlers.
void rows_from_file(const Module& m, ModuleData& data) {
  auto elf = ElfFile::open(m.path);
  if (!elf) return;
  const Section* eh = (*elf)->find_section(".eh_frame");
  if (!eh || eh->type == SHT_NOBITS || !(eh->flags & SHF_ALLOC)) return;
  auto bytes = (*elf)->section_data(*eh);
  if (!bytes) return;
  uint8_t loaded[256];
  const size_t n = std::min(sizeof loaded, bytes->size());
  if (!read_own_memory(eh->addr + m.bias, loaded, n) || std::memcmp(loaded, bytes->data(), n) != 0)
    return;
  if (rows_from_made_table(**elf, data)) data.elf = std::move(*elf);
}
} // namespace

void ModuleMap::load_in_memory(bool whole_tables) {
  for (Module& m : modules_) {
    if (m.data) continue;
    for (const Module& other : modules_)
      if (&other != &m && other.data && other.path == m.path && other.bias == m.bias) {
        m.data = other.data;
        break;
      }
    if (m.data) continue;
    auto data = std::make_shared<ModuleData>();
    find_rows_in_memory(m, *data);
    if (!data->has_rows() && !m.vdso) rows_from_file(m, *data);
    if (!data->has_rows())
      data->error = "no .eh_frame_hdr search table in memory, nor .eh_frame in its file";
    if (whole_tables)
      if (const RowLookup* rows = data->row_lookup())
        if ((data->table = rows->whole_table())) add_compact_table(*data);
    m.data = std::move(data);
  }
}

std::optional<FunctionInfo> ModuleData::function_at(uint64_t svma) const {
  if (has_table())
    if (const TableRange* r = table->find(svma)) return table->function(r->function);
  FunctionInfo fn;
  if (const RowLookup* r = row_lookup(); r && r->find_function(svma, fn) == RowStatus::Found)
    return fn;
  return std::nullopt;
}

void ModuleMap::load_all(const LoadPolicy& policy, MemoryReader* memory) {
  for (Module& m : modules_)
    load(m, policy, memory);
}

} // namespace ehelf
