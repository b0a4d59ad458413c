#include "runtime/module_map.hpp"

#include <algorithm>
#include <cstdio>
#include <elf.h>
#include <fmt/format.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "compile/codegen.hpp"
#include "compile/eh_elf_cache.hpp"
#include "dwarf/module_cfi.hpp"

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
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_LOAD || !(p.p_flags & PF_X)) continue;
    Module m;
    m.path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : self_exe();
    m.bias = info->dlpi_addr;
    m.start = info->dlpi_addr + p.p_vaddr;
    m.end = m.start + p.p_memsz;
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
  std::string maps_path = fmt::format("/proc/{}/maps", pid);
  FILE* f = std::fopen(maps_path.c_str(), "r");
  if (!f) return Error::plain(fmt::format("cannot read {}", maps_path));
  ModuleMap map;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi, offset;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &offset, &path_at) < 4)
      continue;
    std::string path = path_at ? std::string(line + path_at) : std::string();
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (perms[2] != 'x') continue;
    Module m;
    m.start = lo;
    m.end = hi;
    if (path == "[vdso]") {
      m.vdso = true;
      m.path = path;
      m.image_addr = lo; // the vDSO image starts at its first (executable) page
      m.image_size = hi - lo;
      m.bias = lo;       // vDSO SVMAs are offsets from its start (it is linked at 0)
      map.modules_.push_back(std::move(m));
      continue;
    }
    if (path.empty() || path[0] != '/') continue; // anonymous or JIT code: no module
    // The SVMA of `lo` is the vaddr of the PT_LOAD segment holding file offset `offset`.
    auto elf = ElfFile::open(fmt::format("/proc/{}/root{}", pid, path));
    if (!elf) elf = ElfFile::open(path);
    if (!elf) continue;
    if (auto bias = load_bias(**elf, lo, offset)) m.bias = *bias;
    m.path = path;
    map.modules_.push_back(std::move(m));
  }
  std::fclose(f);
  map.finish();
  return map;
}

std::optional<uint64_t> load_bias(const ElfFile& elf, uint64_t map_start, uint64_t file_offset) {
  for (const Segment& s : elf.segments())
    if (s.type == PT_LOAD && file_offset >= s.offset &&
        file_offset < s.offset + std::max<uint64_t>(s.filesz, 1))
      return map_start - (s.vaddr + (file_offset - s.offset));
  return std::nullopt;
}

uint64_t ModuleMap::Generation::next() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

void ModuleMap::finish() {
  generation_.renew();
  std::sort(modules_.begin(), modules_.end(),
            [](const Module& a, const Module& b) { return a.start < b.start; });
  spans_.clear();
  for (const Module& m : modules_)
    spans_.emplace_back(m.start, m.end);
}

const ModuleData& ModuleMap::load(const Module& cm, const LoadPolicy& policy, MemoryReader* memory) {
  Module& m = const_cast<Module&>(cm);
  if (m.data) return *m.data;
  // Modules sharing a file (several executable segments) share one data object.
  for (Module& other : modules_)
    if (&other != &m && other.data && other.path == m.path && other.bias == m.bias) {
      m.data = other.data;
      return *m.data;
    }
  auto data = std::make_shared<ModuleData>();
  Result<std::unique_ptr<ElfFile>> elf = Error::plain("not loaded");
  if (m.vdso) {
    data->image.resize(m.image_size);
    bool ok = false;
    if (memory) ok = memory->read(m.image_addr, data->image.data(), data->image.size());
    else if (m.image_addr == ::getauxval(AT_SYSINFO_EHDR)) {
      std::memcpy(data->image.data(), reinterpret_cast<const void*>(m.image_addr), m.image_size);
      ok = true;
    }
    if (ok) elf = ElfFile::parse(data->image, "[vdso]");
  } else {
    elf = ElfFile::open(m.path);
  }
  if (!elf) {
    data->error = elf.error().to_string();
  } else {
    LoadOptions lo;
    lo.debug_frame = policy.debug_frame;
    lo.separate_debug_file = policy.debug_frame;
    auto cfi = load_module_cfi(std::move(*elf), lo);
    if (!cfi) {
      data->error = cfi.error().to_string();
    } else {
      auto table = build_unwind_table(*cfi);
      if (!table) data->error = table.error().to_string();
      else data->table = std::move(*table);
      if (data->table && policy.compact) {
        data->compact = CompactTable(*data->table);
        data->hot.reserve(data->compact.rules());
        for (uint32_t i = 0; i < data->compact.rules(); ++i)
          data->hot.push_back(hot_form(data->compact.rule(i)));
      }
      if (data->table && policy.compiled)
        if (auto id = cfi->elf->build_id())
          data->compiled = load_cached_eh_elf(*id, RegisterSet::Minimal);
      if (policy.symbols) data->elf = std::move(cfi->elf);
    }
  }
  m.data = data;
  return *m.data;
}

void ModuleMap::load_all(const LoadPolicy& policy, MemoryReader* memory) {
  for (Module& m : modules_) load(m, policy, memory);
}

} // namespace ehelf
