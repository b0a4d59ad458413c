#include "perf/sample_unwinder.hpp"

#include <map>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <optional>
#include <sys/stat.h>
#include <thread>

#include "runtime/memory.hpp"

namespace ehelf::perf {

namespace {

// Callchain entries at or above this are context markers (PERF_CONTEXT_KERNEL, _USER, ...).
constexpr uint64_t kContextMax = static_cast<uint64_t>(-4095);
constexpr uint64_t kContextKernel = static_cast<uint64_t>(-128);
constexpr uint64_t kContextUser = static_cast<uint64_t>(-512);

std::string hex(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t b : bytes)
    s += fmt::format("{:02x}", b);
  return s;
}

std::string buildid_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* d = std::getenv("PERF_BUILDID_DIR"); d && *d) return d;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.debug";
  return {};
}

} // namespace

// Removes [start, end) from a map of non-overlapping ranges keyed by their start (a new mapping
// replaces what it covers): O(log n) plus the ranges it touches.
template <class Range>
void carve_ranges(std::map<uint64_t, Range>& ranges, uint64_t start, uint64_t end) {
  auto it = ranges.lower_bound(start);
  if (it != ranges.begin())
    if (auto before = std::prev(it); before->second.end > start) it = before;
  std::vector<Range> kept;
  while (it != ranges.end() && it->second.start < end) {
    const Range& r = it->second;
    if (r.start < start) {
      Range left = r;
      left.end = start;
      kept.push_back(std::move(left));
    }
    if (r.end > end) {
      Range right = r;
      if constexpr (requires { right.offset; }) right.offset += end - r.start;
      right.start = end;
      kept.push_back(std::move(right));
    }
    it = ranges.erase(it);
  }
  for (Range& r : kept)
    ranges.emplace(r.start, std::move(r));
}

// A process's executable mappings as perf recorded them, and the modules we have files for.
// Shared copy-on-write between a process and the children it forks (a fork copies nothing until
// one of them maps something) and with the raw stacks that keep them for naming, so memory
// stays proportional to the recording.
struct ProcessMaps {
  ProcessMaps() = default;
  ProcessMaps(const ProcessMaps& o) : mappings(o.mappings), modules(o.modules) {}
  ProcessMaps& operator=(const ProcessMaps&) = delete;

  // Unique over the run: every maps object (a copy too) gets its own, and a new one at each
  // change (Process::own), since stacks are told apart by it.
  uint64_t id = next_id();
  using Mapping = FileMapping;
  std::map<uint64_t, Mapping> mappings; // every executable mapping, for naming frames
  std::map<uint64_t, Module> modules;   // the mappings whose files are usable here

  // The executable mapping holding `addr`, or null.
  const Mapping* mapping_at(uint64_t addr) const {
    auto it = mappings.upper_bound(addr);
    if (it == mappings.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &it->second : nullptr;
  }
  ModuleMap module_map() const {
    ModuleMap map;
    for (const auto& [start, m] : modules)
      map.add(m);
    map.finish();
    return map;
  }

  static uint64_t next_id() {
    static std::atomic<uint64_t> counter{0};
    return ++counter;
  }
};

// A user frame of a process: resolved to its module, whether a signal trampoline is below it
// (the next pc is then the interrupted instruction, looked up as is), and its name once asked.
struct SampleUnwinder::PcFrame {
  ResolvedFrame resolved;
  bool signal_frame_below = false;
};

// One recorded process: its maps and an Unwinder over them.
struct SampleUnwinder::Process {
  std::shared_ptr<ProcessMaps> maps = std::make_shared<ProcessMaps>();
  // A mapping (executable or not) was recorded for it, or for the parent it forked from. perf
  // makes a process's unwinding address space with its first mapping: before that, perf script
  // prints no user frame for a stack copy, where a walk would give one [unknown] frame.
  bool mapped = false;
  ModuleMap map;
  std::unique_ptr<Unwinder> unwinder;
  bool dirty = true; // modules changed since `map` was built
  // The user frames met since `map` was built, by (pc << 1 | looked up by its call): see
  // frame_at().
  std::unordered_map<uint64_t, PcFrame> frames_by_pc;
  // The maps of the programs it ran before its last execs, oldest first, each with the time of
  // the exec that ended it: a stack counted in the kernel (adopt_raw) is named with the maps of
  // the program it ran in, which may have exec'd another since (a shell's exec, env, a shim).
  struct Earlier {
    uint64_t until = 0;
    std::shared_ptr<ProcessMaps> maps;
    std::optional<ModuleMap> map; // made when a stack is first named with them
    uint64_t began = 0;           // (program_at)
  };
  uint64_t began = 0; // the record time of the exec or fork that made its present program
  std::deque<Earlier> earlier;
  // (An exec chain: env, a shim, its interpreter; an exec loop makes ~100 a second, and a stack
  // waits for at most two drains, 100 ms apart.)
  static constexpr size_t kEarlierPrograms = 64;

  // The maps, made this process's own first if a forked relative shares them, under a new id:
  // a stack named before the change is another stack after it (the profile keeps stacks by maps
  // id). In kernel mode a stack the kernel counted can be named before the record of a mapping
  // it runs in is read (the record still in a ring), and under the same id it stayed unnamed.
  ProcessMaps& own() {
    if (maps.use_count() > 1)
      maps = std::make_shared<ProcessMaps>(*maps);
    else
      maps->id = ProcessMaps::next_id();
    dirty = true;
    return *maps;
  }
};

// A module file loaded once for every process that maps it.
struct SampleUnwinder::LoadedFile {
  std::shared_ptr<const ModuleData> data; // null: not usable (missing, build id differs)
  std::string path;                       // the file used
  bool vdso = false;
  uint64_t vdso_offset = 0; // for the vDSO: bias - start in this process
};

SampleUnwinder::SampleUnwinder(const PerfData& data, SampleUnwinderOptions options)
    : SampleUnwinder(RecordingInfo{data.build_ids(), data.os_release()}, std::move(options)) {
  // Kernel names are read while the first records are processed, not when the first kernel
  // frame is named: reading them is a large part of a small recording's time. Not for events
  // that all exclude the kernel (perf_event_attr.exclude_kernel, bit 5).
  const bool kernel_counted = std::any_of(data.attrs().begin(), data.attrs().end(),
                                          [](const EventAttr& a) { return !((a.flags >> 5) & 1); });
  if (!options_.kernel || !options_.symbols || !kernel_counted) return;
  // In the background: a recording without kernel frames does not wait for it at the end.
  kernel_symbols_pending_ = std::make_shared<std::future<KernelSymbols>>(
      KernelSymbols::load_in_background([dir = buildid_dir(options_.buildid_dir),
                                         id = kernel_build_id(), release = info_.os_release] {
        return KernelSymbols::load_for_recording(dir, id, release);
      }));
}

SampleUnwinder::SampleUnwinder(RecordingInfo info, SampleUnwinderOptions options)
    : info_(std::move(info)), options_(std::move(options)) {
  for (const BuildIdEntry& e : info_.build_ids)
    if (!e.build_id.empty()) recorded_build_ids_[e.filename] = e.build_id;
}

SampleUnwinder::~SampleUnwinder() = default;

std::vector<uint8_t> SampleUnwinder::kernel_build_id() const {
  for (const BuildIdEntry& e : info_.build_ids)
    if (e.kernel && e.filename == "[kernel.kallsyms]") return e.build_id;
  return {};
}

SlowSteps SampleUnwinder::slow_steps() const {
  SlowSteps sum{};
  for (const auto& [pid, p] : processes_)
    if (p && p->unwinder) {
      const SlowSteps s = p->unwinder->slow_steps();
      for (unsigned i = 0; i < kNotExpressibleCount; ++i)
        sum[i] += s[i];
    }
  return sum;
}

uint64_t SampleUnwinder::frames_outside_modules() const {
  uint64_t sum = 0;
  for (const auto& [pid, p] : processes_)
    if (p && p->unwinder) sum += p->unwinder->frames_outside_modules();
  return sum;
}

SampleUnwinder::Process& SampleUnwinder::process(uint32_t pid) {
  auto& p = processes_[pid];
  if (!p) p = std::make_unique<Process>();
  return *p;
}

bool SampleUnwinder::feed(const Record& r, SampleStack& out) {
  if (!prepare(r, prepared_)) return false;
  name_prepared(prepared_, out);
  return true;
}

bool SampleUnwinder::prepare(const Record& r, PreparedStack& out) {
  if (const auto* s = std::get_if<SampleRecord>(&r.body)) {
    prepare_sample(r, *s, out);
    return true;
  }
  if (const auto* m = std::get_if<MmapRecord>(&r.body))
    on_mmap(*m);
  else if (const auto* c = std::get_if<CommRecord>(&r.body))
    on_comm(*c, r.time);
  else if (const auto* t = std::get_if<TaskRecord>(&r.body))
    r.type == record_type::kFork ? on_fork(*t) : on_exit(*t);
  return false;
}

void SampleUnwinder::on_comm(const CommRecord& c, uint64_t time) {
  comms_[c.tid] = std::string(c.comm);
  if (c.exec && c.pid == c.tid) { // a new program: the old mappings are gone
    Process& p = process(c.pid);
    p.earlier.push_back({time, p.maps, std::nullopt, p.began});
    if (p.earlier.size() > Process::kEarlierPrograms) p.earlier.pop_front();
    p.maps = std::make_shared<ProcessMaps>();
    p.began = time;
    p.dirty = true;
  }
}

void SampleUnwinder::on_fork(const TaskRecord& t) {
  if (auto it = comms_.find(t.ptid); it != comms_.end() && !comms_.count(t.tid))
    comms_[t.tid] = it->second;
  if (t.pid == t.ppid) return; // a new thread: same process
  auto parent = processes_.find(t.ppid);
  if (parent == processes_.end()) return;
  Process& child = process(t.pid);
  child.maps = parent->second->maps; // shared until one of them maps something
  child.mapped = parent->second->mapped;
  child.dirty = true;
  child.began = t.time;
}

SampleUnwinder::Program SampleUnwinder::program_at(uint32_t pid, uint64_t time) const {
  Program out;
  auto it = processes_.find(pid);
  if (it == processes_.end()) return out;
  const Process& p = *it->second;
  const ProcessMaps* maps = p.maps.get();
  out.began = p.began;
  for (const Process::Earlier& e : p.earlier)
    if (time < e.until) {
      maps = e.maps.get();
      out.began = e.began;
      break;
    }
  out.mappings.reserve(maps->mappings.size());
  for (const auto& [start, m] : maps->mappings)
    out.mappings.push_back(m);
  return out;
}

void SampleUnwinder::on_exit(const TaskRecord& t) {
  // Samples of an exiting process may still follow in time order on another CPU: keep its maps.
  (void)t;
}

std::shared_ptr<const ModuleData> SampleUnwinder::data_for(const MmapRecord& m,
                                                           std::string& path_used, uint64_t& bias) {
  const std::string name(m.filename);
  std::vector<uint8_t> want(m.build_id.begin(), m.build_id.end());
  if (want.empty())
    if (auto it = recorded_build_ids_.find(name); it != recorded_build_ids_.end())
      want = it->second;
  const std::string key = name + "\n" + hex(want);
  auto& slot = files_[key];
  if (!slot) {
    slot = std::make_unique<LoadedFile>();
    if (name == "[vdso]") {
      // This process's vDSO, when it is the recorded one (same kernel).
      ModuleMap self = ModuleMap::for_self();
      for (Module& sm : self.modules()) {
        if (!sm.vdso) continue;
        const ModuleData& d = self.load(sm);
        if (!d.elf) break;
        auto id = d.elf->build_id();
        if (!want.empty() && (!id || !std::equal(id->begin(), id->end(), want.begin(), want.end())))
          break;
        slot->data = sm.data;
        slot->path = "[vdso]";
        slot->vdso = true;
        slot->vdso_offset = sm.bias - sm.start;
        break;
      }
    } else {
      std::vector<std::string> candidates{name};
      if (want.size() > 1) {
        std::string dir = buildid_dir(options_.buildid_dir);
        std::string h = hex(want);
        if (!dir.empty())
          candidates.push_back(
              fmt::format("{}/.build-id/{}/{}/elf", dir, h.substr(0, 2), h.substr(2)));
      }
      for (const std::string& path : candidates) {
        // Regular files only: opening a FIFO a recording names would block forever.
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        auto elf = ElfFile::open(path);
        if (!elf) continue;
        auto id = (*elf)->build_id();
        if (!want.empty() && (!id || !std::equal(id->begin(), id->end(), want.begin(), want.end())))
          continue;
        LoadPolicy policy = LoadPolicy::for_backend(options_.backend);
        policy.whole_table = false; // rows found on demand: only the sampled pcs cost anything
        policy.extra_debug_dirs = options_.debug_dirs;
        auto d = load_module(path, policy);
        if (!d->elf) continue;
        slot->data = std::move(d);
        slot->path = path;
        break;
      }
    }
  }
  path_used = slot->path;
  if (!slot->data) return nullptr;
  if (slot->vdso) {
    bias = m.start + slot->vdso_offset;
    return slot->data;
  }
  auto b = load_bias(*slot->data->elf, m.start, m.pgoff);
  if (!b) return nullptr;
  bias = *b;
  return slot->data;
}

void SampleUnwinder::on_mmap(const MmapRecord& m) {
  if (m.pid == static_cast<uint32_t>(-1)) return; // the kernel's own mappings
  if (m.len != 0) process(m.pid).mapped = true;
  if (!m.executable() || m.len == 0 || m.start + m.len < m.start) return;
  Process& p = process(m.pid);
  const uint64_t end = m.start + m.len;
  ProcessMaps& maps = p.own();
  carve_ranges(maps.mappings, m.start, end);
  carve_ranges(maps.modules, m.start, end);
  std::string path;
  uint64_t bias = 0;
  auto data = data_for(m, path, bias);
  // The build id the kernel read from the mapped file, else the one of the file used here.
  std::string build_id = hex(m.build_id);
  if (build_id.empty() && data && data->elf) build_id = data->elf->build_id_hex();
  maps.mappings.emplace(
      m.start, FileMapping{std::string(m.filename), m.start, end, m.pgoff, std::move(build_id)});
  if (!data) {
    ++stats_.modules_missing;
    return;
  }
  Module mod;
  mod.path = path;
  mod.start = m.start;
  mod.end = end;
  mod.bias = bias;
  mod.vdso = path == "[vdso]";
  mod.data = std::move(data);
  maps.modules.emplace(mod.start, std::move(mod));
}

ResolvedFrame SampleUnwinder::resolve_frame(const ProcessMaps& maps, const ModuleMap& map,
                                            uint64_t pc, bool return_address) {
  // A return address names its call: the instruction before it (the call may be a function's
  // last, with the next function right after it).
  const uint64_t lookup = return_address ? pc - 1 : pc;
  ResolvedFrame f;
  f.pc = pc;
  f.return_address = return_address;
  f.dso_address = lookup;
  if (const ProcessMaps::Mapping* m = maps.mapping_at(lookup)) {
    f.mapping = &*file_mappings_.insert(*m).first;
    f.dso_address = lookup - m->start + m->offset;
  }
  if (const Module* mod = map.find(lookup))
    f.module = &interned_.try_emplace({mod->data.get(), mod->bias, mod->start, mod->path}, *mod)
                    .first->second;
  return f;
}

const StackFrame& SampleUnwinder::named_frame(uint32_t pid, const ResolvedFrame& r) {
  const uint64_t lookup = r.return_address ? r.pc - 1 : r.pc;
  // Named once per (module, address); code in no module once per (process, address).
  auto [it, added] = named_.try_emplace(NamedKey{r.module, lookup, r.module ? 0 : pid});
  StackFrame& named = it->second;
  if (added) {
    named.module = r.mapping ? r.mapping->path : std::string();
    named.mapping = r.mapping;
    named.dso_address = r.dso_address;
    if (options_.symbols && r.module) {
      SymbolName n = symbolizer_.name(empty_map_, *r.module, lookup);
      if (!n.name.empty()) {
        if (options_.demangle) {
          // Once per symbol: the addresses of a function share its name.
          auto [d, fresh] = demangled_.try_emplace(n.name);
          if (fresh) d->second = demangle(n.name, false);
          named.symbol = d->second;
        } else {
          named.symbol = std::string(n.name);
        }
        named.symbol_offset = n.offset;
      }
    } else if (options_.symbols &&
               (named.module.empty() || named.module[0] != '/' || named.module == "//anon")) {
      // Code in no file (anonymous memory): a JIT's, named from its perf map as perf does.
      auto [pm, fresh] = perf_maps_.try_emplace(pid);
      if (fresh) pm->second = PerfMap::load(pid);
      if (const PerfMap::Entry* e = pm->second.find(lookup)) {
        named.symbol = e->name;
        named.symbol_offset = lookup - e->start;
        named.module = PerfMap::path_for(pid);
        named.dso_address = lookup;
      }
    }
  }
  return named;
}

void SampleUnwinder::name_resolved(uint32_t pid, const ResolvedFrame& r, StackFrame& f) {
  f = named_frame(pid, r);
  f.pc = r.pc;
  if (r.recorded) ++f.dso_address;
}

void SampleUnwinder::refresh(Process& p) {
  if (!p.dirty) return;
  p.map = p.maps->module_map();
  if (!p.unwinder) {
    UnwinderOptions o;
    o.backend = options_.backend;
    o.max_depth = options_.max_depth;
    o.allow_loading = false; // every module comes loaded (data_for), from the right file
    p.unwinder = std::make_unique<Unwinder>(p.map, o);
  }
  p.unwinder->clear_cache();
  p.frames_by_pc.clear();
  p.dirty = false;
}

StopReason SampleUnwinder::walk_user(Process& p, const SampleRecord& s,
                                     std::vector<uint64_t>& pcs) {
  pcs.clear();
  // Every general register the sample has: the first frame's rule may read any of them (a
  // return address in rcx, a CFA in r10).
  RegisterState regs;
  if (s.regs_abi != 0) {
    if (s.regs_mask != reg_layout_.mask) reg_layout_ = GeneralRegLayout(s.regs_mask);
    // The decoder takes 8 bytes per bit of the mask; a record built otherwise with fewer
    // registers gives those it has.
    const size_t recorded = s.regs.size() / 8;
    for (unsigned r = 0; r < reg_layout_.index.size(); ++r)
      if (const int i = reg_layout_.index[r]; i >= 0 && size_t(i) < recorded) {
        std::memcpy(&regs.value[r], s.regs.data() + 8 * size_t(i), 8);
        regs.valid |= 1u << r;
      }
  }
  if (!regs.has(x86_64::RIP) || !regs.has(x86_64::RSP)) return StopReason::None;
  ++stats_.user_samples;
  refresh(p);
  // The stack copy, read where perf stored it: addresses [sp, sp + size) map into the file
  // (FastWalk::sample: a copy at or above 2^63 is not read, see sample_range_ok).
  // Walked into a buffer kept between samples (sizing `pcs` to the depth each time would zero
  // kilobytes per sample).
  walk_buffer_.resize(options_.max_depth ? options_.max_depth : 1);
  StopReason why = StopReason::None;
  const size_t n = p.unwinder->backtrace_sample(regs, s.stack_data(), walk_buffer_.data(),
                                                walk_buffer_.size(), &why, FrameAddress::Exact);
  pcs.assign(walk_buffer_.begin(), walk_buffer_.begin() + static_cast<ptrdiff_t>(n));
  if (why != StopReason::EndOfStack) ++stats_.stopped_early;
  return why;
}

SampleUnwinder::PcFrame& SampleUnwinder::frame_at(Process& p, uint64_t pc, bool exact) {
  auto [it, added] = p.frames_by_pc.try_emplace((pc << 1) | (exact ? 0 : 1));
  if (added) {
    it->second.resolved = resolve_frame(*p.maps, p.map, pc, !exact);
    it->second.signal_frame_below = in_signal_trampoline(p.map, exact ? pc : pc - 1);
  }
  return it->second;
}

StackFrame& SampleUnwinder::frame_slot(SampleStack& out, size_t n) {
  if (n < out.frames.size()) return out.frames[n];
  if (spare_frames_.empty()) return out.frames.emplace_back();
  out.frames.push_back(std::move(spare_frames_.back()));
  spare_frames_.pop_back();
  return out.frames.back();
}

void SampleUnwinder::trim(SampleStack& out, size_t n) {
  while (out.frames.size() > n) {
    spare_frames_.push_back(std::move(out.frames.back()));
    out.frames.pop_back();
  }
}

bool SampleUnwinder::in_signal_trampoline(const ModuleMap& map, uint64_t lookup) {
  const Module* mod = map.find(lookup);
  if (!mod || !mod->data) return false;
  const uint64_t svma = lookup - mod->bias;
  auto [it, added] = signal_trampolines_.try_emplace({mod->data.get(), svma}, false);
  if (added) {
    const auto fn = mod->data->function_at(svma);
    it->second = fn && fn->signal_frame;
  }
  return it->second;
}

void SampleUnwinder::kernel_frame(uint64_t pc, StackFrame& f) {
  f.pc = f.dso_address = pc;
  f.symbol.clear();
  f.symbol_offset = 0;
  f.module.assign("[kernel.kallsyms]");
  f.mapping = nullptr;
  if (options_.symbols) {
    if (!kernel_symbols_loaded_) { // read once a kernel frame is printed, if not already
      kernel_symbols_ =
          kernel_symbols_pending_
              ? kernel_symbols_pending_->get()
              : KernelSymbols::load_for_recording(buildid_dir(options_.buildid_dir),
                                                  kernel_build_id(), info_.os_release);
      kernel_symbols_pending_.reset();
      kernel_symbols_loaded_ = true;
    }
    std::string_view name;
    if (kernel_symbols_.name(pc, name, f.symbol_offset)) f.symbol.assign(name);
  }
}

std::string SampleUnwinder::comm_of(uint32_t pid, uint32_t tid) const {
  if (auto it = comms_.find(tid); it != comms_.end()) return it->second;
  if (auto it = comms_.find(pid); it != comms_.end()) return it->second;
  if (pid == 0) return "swapper"; // the idle task, as perf names it (it has no COMM record)
  return fmt::format(":{}", tid);
}

void SampleUnwinder::kernel_pcs(const Record& r, const SampleRecord& s,
                                std::vector<uint64_t>& pcs) const {
  pcs.clear();
  if (!options_.kernel || r.cpumode() != CpuMode::Kernel) return;
  bool kernel = false;
  for (size_t i = 0; i < s.callchain_size(); ++i) {
    const uint64_t pc = s.callchain_at(i);
    if (pc >= kContextMax) {
      kernel = pc == kContextKernel;
      continue;
    }
    if (kernel) pcs.push_back(pc);
  }
}

bool SampleUnwinder::feed_raw(const Record& r, RawStack& out) {
  const auto* s = std::get_if<SampleRecord>(&r.body);
  if (!s) {
    SampleStack unused;
    feed(r, unused);
    return false;
  }
  ++stats_.samples;
  out.pid = s->pid;
  out.tid = s->tid;
  out.time = s->time;
  out.period = s->weight();
  kernel_pcs(r, *s, out.kernel);
  Process& p = process(s->pid);
  out.user_walked = s->regs_abi != 0 && !s->stack.empty();
  if (out.user_walked) {
    out.stop = walk_user(p, *s, out.user);
  } else {
    out.user.clear();
    out.stop = StopReason::None;
  }
  out.maps = p.maps.get();
  out.maps_id = p.maps->id;
  stats_.frames += out.kernel.size() + out.user.size();
  return true;
}

void SampleUnwinder::adopt_raw(RawStack& out, uint64_t samples, uint64_t since) {
  stats_.samples += samples;
  stats_.user_samples += samples;
  stats_.frames += samples * (out.kernel.size() + out.user.size());
  if (out.user_walked && out.stop != StopReason::EndOfStack) stats_.stopped_early += samples;
  Process& p = process(out.pid);
  refresh(p); // the module map resolve() names the frames with, as of the records fed so far
  out.maps = p.maps.get();
  out.maps_id = p.maps->id;
  // Sampled in a program the process has exec'd another after: that program's maps.
  if (since != 0)
    for (const Process::Earlier& e : p.earlier)
      if (since < e.until) {
        out.maps = e.maps.get();
        out.maps_id = e.maps->id;
        break;
      }
}

ResolvedStack SampleUnwinder::resolve(const RawStack& raw) {
  ResolvedStack out;
  out.pid = raw.pid;
  out.tid = raw.tid;
  out.time = raw.time;
  out.period = raw.period;
  out.kernel = raw.kernel;
  out.stop = raw.stop;
  out.user_walked = raw.user_walked;
  if (!raw.maps || raw.user.empty()) return out;
  Process& p = process(raw.pid);
  // The first pc is the sampled one, and so is each pc under a signal frame (the interrupted
  // instruction, which the walk looks up as is): those are named at the pc itself, as perf
  // does; the others are return addresses, named by their call (pc - 1).
  // (raw.maps are the process's current maps, resolve() following the feed_raw() or adopt_raw()
  // of the stack, or for adopt_raw those of a program it ran before its last exec.)
  bool exact = true;
  out.user.reserve(raw.user.size());
  if (raw.maps != p.maps.get()) {
    for (Process::Earlier& e : p.earlier) {
      if (e.maps.get() != raw.maps) continue;
      if (!e.map) e.map = e.maps->module_map();
      for (uint64_t pc : raw.user) {
        out.user.push_back(resolve_frame(*e.maps, *e.map, pc, !exact));
        exact = in_signal_trampoline(*e.map, exact ? pc : pc - 1);
      }
      return out;
    }
    return out; // (maps no longer kept: the stack's frames stay unnamed)
  }
  for (uint64_t pc : raw.user) {
    const PcFrame& f = frame_at(p, pc, exact);
    out.user.push_back(f.resolved);
    exact = f.signal_frame_below;
  }
  return out;
}

void SampleUnwinder::name_stack(const ResolvedStack& stack, std::string_view comm,
                                SampleStack& out) {
  // Filled in place, as name_prepared does: a caller naming many stacks into one SampleStack
  // reuses its frames' strings instead of allocating them per stack.
  out.comm.assign(comm);
  out.pid = stack.pid;
  out.tid = stack.tid;
  out.time = stack.time;
  out.period = stack.period;
  out.ip_only = false;
  name_frames(stack.pid, stack.kernel, stack.user, out);
  out.stop.assign(stack.user_walked ? stop_reason_name(stack.stop) : "no user stack");
}

void SampleUnwinder::name_frames(uint32_t pid, std::span<const uint64_t> kernel,
                                 std::span<const ResolvedFrame> user, SampleStack& out) {
  size_t n = 0;
  for (uint64_t pc : kernel)
    kernel_frame(pc, frame_slot(out, n++));
  for (const ResolvedFrame& r : user)
    name_resolved(pid, r, frame_slot(out, n++));
  trim(out, n);
}

void SampleUnwinder::prepare_sample(const Record& r, const SampleRecord& s, PreparedStack& out) {
  ++stats_.samples;
  out.pid = s.pid;
  out.tid = s.tid;
  out.time = s.time;
  out.period = s.weight();
  out.ip_only = false;
  out.stop = {};
  out.comm = comm_of(s.pid, s.tid);
  // Kernel frames: the callchain's kernel context.
  kernel_pcs(r, s, out.kernel);
  out.user.clear();
  Process& p = process(s.pid);
  if (s.regs_abi == 0 || s.stack.empty()) {
    // No stack copy: a recording with frame-pointer call chains (perf record -g), or a kernel
    // thread. The callchain's user part is then the stack, as the kernel walked it.
    refresh(p);
    bool user = false, first = true;
    for (size_t i = 0;
         i < s.callchain_size() && out.kernel.size() + out.user.size() < options_.max_depth; ++i) {
      const uint64_t pc = s.callchain_at(i);
      if (pc >= kContextMax) {
        user = pc == kContextUser;
        continue;
      }
      if (!user) continue;
      // A return address is looked up by its call, and printed as recorded.
      out.user.push_back(resolve_frame(*p.maps, p.map, pc, !first));
      out.user.back().recorded = !first;
      first = false;
    }
    // Without a call chain (perf record without -g or --call-graph), the sampled ip is the
    // stack, as perf script prints it.
    const bool has_ip = s.attr && (s.attr->sample_type & sample::kIp);
    const bool none = out.kernel.empty() && out.user.empty();
    if (first && none && has_ip && r.cpumode() == CpuMode::User) {
      out.user.push_back(resolve_frame(*p.maps, p.map, s.ip, false));
      out.stop = "sampled ip only (no call chain recorded)";
      out.ip_only = true;
    } else if (has_ip && none && r.cpumode() == CpuMode::Kernel && options_.kernel) {
      out.kernel.push_back(s.ip);
      out.stop = "sampled ip only (no call chain recorded)";
      out.ip_only = true;
    } else {
      out.stop = !first                           ? "frame-pointer call chain (perf record -g)"
                 : r.cpumode() == CpuMode::Kernel ? "kernel thread"
                                                  : "no user stack in the sample";
    }
    stats_.frames += out.kernel.size() + out.user.size();
    return;
  }
  if (!p.mapped) { // as perf script: nothing to unwind the stack copy in yet
    out.stop = "no mapping recorded for the process yet";
    stats_.frames += out.kernel.size();
    return;
  }
  const StopReason why = walk_user(p, s, pcs_);
  if (why == StopReason::None && pcs_.empty()) {
    out.stop = "no user registers";
  } else {
    // As resolve(): the first pc and each under a signal frame at the pc, the others by their
    // call.
    bool exact = true;
    for (uint64_t pc : pcs_) {
      const PcFrame& f = frame_at(p, pc, exact);
      out.user.push_back(f.resolved);
      exact = f.signal_frame_below;
    }
    out.stop = stop_reason_name(why);
  }
  stats_.frames += out.kernel.size() + out.user.size();
}

void SampleUnwinder::name_prepared(const PreparedStack& in, SampleStack& out) {
  // `out` is filled in place: its frames' strings keep their storage from the last sample.
  out.pid = in.pid;
  out.tid = in.tid;
  out.time = in.time;
  out.period = in.period;
  out.comm.assign(in.comm);
  out.ip_only = in.ip_only;
  out.stop.assign(in.stop);
  name_frames(in.pid, in.kernel, in.user, out);
}

} // namespace ehelf::perf
