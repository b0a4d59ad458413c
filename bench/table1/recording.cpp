#include "recording.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "perf/record_stream.hpp"
#include "perf/sample_unwinder.hpp"
#include "runtime/module_map.hpp"

namespace table1 {

using namespace ehelf;
using namespace ehelf::perf;

bool ModuleFile::read(uint64_t svma, void* out, size_t size) const {
  for (const Segment& s : loads) {
    if (svma < s.vaddr || svma - s.vaddr >= s.filesz) continue;
    const uint64_t off = s.offset + (svma - s.vaddr);
    if (s.filesz - (svma - s.vaddr) < size || off + size > elf->bytes().size()) return false;
    std::memcpy(out, elf->bytes().data() + off, size);
    return true;
  }
  return false;
}

const ModuleRef* Maps::find(uint64_t avma) const {
  auto it = std::upper_bound(modules.begin(), modules.end(), avma,
                             [](uint64_t a, const ModuleRef& m) { return a < m.start; });
  if (it == modules.begin()) return nullptr;
  --it;
  return avma < it->end ? &*it : nullptr;
}

bool Maps::read_file(uint64_t avma, void* out, size_t size) const {
  // Unwind tables sit outside the executable mapping (in the read-only segment after it): the
  // module whose file image holds the address, read from the file as perf reads a dso's.
  auto it = std::upper_bound(images.begin(), images.end(), avma,
                             [](uint64_t a, const Image& i) { return a < i.begin; });
  if (it == images.begin()) return false;
  --it;
  return avma < it->end && it->module->file->read(avma - it->module->bias, out, size);
}

bool Sample::read_stack(uint64_t addr, void* out, size_t size) const {
  if (addr < sp() || addr - sp() > stack.size() || stack.size() - (addr - sp()) < size)
    return false;
  std::memcpy(out, stack.data() + (addr - sp()), size);
  return true;
}

namespace {

struct Mapping {
  uint64_t start, end, pgoff;
  std::string path;
  std::vector<uint8_t> build_id;
};

struct Process {
  std::map<uint64_t, Mapping> mappings;
  std::shared_ptr<const Maps> maps; // null: changed since last built
};

// perf's x86_64 user register numbers in DWARF order (perf_regs.h: ax bx cx dx si di bp sp ip
// flags cs ss ds es fs gs r8..r15).
constexpr unsigned kPerfOfDwarf[17] = {0, 3, 2, 1, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23, 8};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "table1: %s\n", what.c_str());
  std::exit(1);
}

class Reader {
public:
  explicit Reader(Recording& rec) : rec_(rec) {
    for (const BuildIdEntry& e : rec.data->build_ids())
      if (!e.build_id.empty()) recorded_ids_[e.filename] = e.build_id;
  }

  void feed(const Record& r, size_t limit) {
    if (const auto* s = std::get_if<SampleRecord>(&r.body)) {
      ++rec_.all_samples;
      if (limit && rec_.samples.size() >= limit) return;
      add_sample(*s);
      if (r.storage && (rec_.storage.empty() || rec_.storage.back() != r.storage))
        rec_.storage.push_back(r.storage);
    } else if (const auto* m = std::get_if<MmapRecord>(&r.body)) {
      on_mmap(*m);
    } else if (const auto* c = std::get_if<CommRecord>(&r.body)) {
      if (c->exec && c->pid == c->tid) processes_[c->pid] = Process{};
    } else if (const auto* t = std::get_if<TaskRecord>(&r.body)) {
      if (r.type == record_type::kFork && t->pid != t->ppid)
        if (auto it = processes_.find(t->ppid); it != processes_.end())
          processes_[t->pid] = it->second;
    }
  }

private:
  void on_mmap(const MmapRecord& m) {
    if (!m.executable() || m.len == 0 || m.start + m.len < m.start) return;
    if (m.pid == static_cast<uint32_t>(-1)) return;
    Process& p = processes_[m.pid];
    const uint64_t end = m.start + m.len;
    for (auto it = p.mappings.begin(); it != p.mappings.end();) // replaced mappings go
      it = (it->second.start < end && it->second.end > m.start) ? p.mappings.erase(it)
                                                                : std::next(it);
    Mapping mapping{m.start, end, m.pgoff, std::string(m.filename),
                    std::vector<uint8_t>(m.build_id.begin(), m.build_id.end())};
    if (mapping.build_id.empty())
      if (auto it = recorded_ids_.find(mapping.path); it != recorded_ids_.end())
        mapping.build_id = it->second;
    p.mappings.emplace(m.start, std::move(mapping));
    p.maps = nullptr;
  }

  const ModuleFile* file_for(const Mapping& m) {
    const std::string key = m.path + '\n' + std::string(m.build_id.begin(), m.build_id.end());
    if (auto it = files_.find(key); it != files_.end()) return it->second;
    const ModuleFile* result = nullptr;
    struct stat st {};
    if (::stat(m.path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (auto elf = ElfFile::open(m.path)) {
        auto id = (*elf)->build_id();
        const bool same =
            m.build_id.empty() ||
            (id && std::equal(id->begin(), id->end(), m.build_id.begin(), m.build_id.end()));
        if (same) {
          auto f = std::make_unique<ModuleFile>();
          f->path = m.path;
          f->elf = std::move(*elf);
          for (const Segment& seg : f->elf->segments())
            if (seg.type == 1 /* PT_LOAD */ && seg.filesz) f->loads.push_back(seg);
          result = f.get();
          rec_.files.push_back(std::move(f));
        }
      }
    }
    files_[key] = result;
    return result;
  }

  const Maps* maps_of(Process& p) {
    if (p.maps) return p.maps.get();
    auto maps = std::make_shared<Maps>();
    for (const auto& [start, m] : p.mappings) {
      const ModuleFile* f = file_for(m);
      auto bias = f ? load_bias(*f->elf, m.start, m.pgoff) : std::nullopt;
      if (!bias) {
        maps->missing.emplace_back(m.start, m.path);
        continue;
      }
      maps->modules.push_back(ModuleRef{m.start, m.end, *bias, f});
    }
    for (const ModuleRef& m : maps->modules) {
      uint64_t lo = ~uint64_t(0), hi = 0;
      for (const Segment& seg : m.file->loads) {
        lo = std::min(lo, seg.vaddr);
        hi = std::max(hi, seg.vaddr + seg.filesz);
      }
      if (lo < hi) maps->images.push_back(Maps::Image{m.bias + lo, m.bias + hi, &m});
    }
    std::sort(maps->images.begin(), maps->images.end(),
              [](const Maps::Image& a, const Maps::Image& b) { return a.begin < b.begin; });
    maps->index = rec_.maps.size();
    p.maps = maps;
    rec_.maps.push_back(maps);
    return maps.get();
  }

  void add_sample(const SampleRecord& s) {
    if (s.regs_abi == 0 || s.stack_data().empty()) return;
    Sample out;
    for (unsigned r = 0; r < 17; ++r)
      if (uint64_t v; s.reg(kPerfOfDwarf[r], v)) out.regs.set(r, v);
    if (!out.regs.has(16) || !out.regs.has(7)) return;
    out.pid = s.pid;
    out.tid = s.tid;
    out.stack = s.stack_data();
    out.maps = maps_of(processes_[s.pid]);
    rec_.samples.push_back(out);
  }

  Recording& rec_;
  std::map<uint32_t, Process> processes_;
  std::map<std::string, std::vector<uint8_t>> recorded_ids_;
  std::map<std::string, const ModuleFile*> files_;
};

} // namespace

Recording read_recording(const std::string& path, size_t limit) {
  Recording rec;
  rec.path = path;
  auto data = PerfData::open(path);
  if (!data) fail(data.error().to_string());
  rec.data = std::make_unique<PerfData>(std::move(*data));
  // The samples' stack copies point into the PerfData's file, or into what it decompressed
  // (kept in rec.storage).
  RecordStream records(*rec.data);
  Reader reader(rec);
  while (const Record* r = records.next())
    reader.feed(*r, limit);
  if (records.damage()) fail(records.damage()->to_string());
  return rec;
}

} // namespace table1
