#include "bpf/kernel_walk.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <elf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "bpf/bpf_maps.h"
#include "bpf/bpf_rows.hpp"
#include "bpf/kernel_btf.hpp"
#include "bpf/libbpf_log.hpp"
#include "bpf/mapped_array.hpp"
#include "bpf/range_pool.hpp"
#include "bpf/table_builder.hpp"
#include "elf/elf_file.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/proc_files.hpp"
#include "support/monotonic_clock.hpp"
#include "support/read_fully.hpp"
#include "unwind.skel.h"

namespace ehelf::bpf {

static_assert(kWalkStopCount == EHELF_STOP_COUNT);

std::string_view walk_stop_name(unsigned stop) {
  // By stop reason, in bpf_walk.h's order (EHELF_STOP_OK = 0 ... EHELF_STOP_ROW_MISSING).
  static constexpr std::string_view kNames[] = {
      "none",
      "end of stack",
      "no unwind entry for the pc",
      "row not expressible in the kernel",
      "memory read refused",
      "a needed register is unknown",
      "stack pointer did not grow",
      "process not loaded yet",
      "pc in no known module",
      "table not loaded yet",
      "depth limit",
      "row changed under the walk",
  };
  static_assert(std::size(kNames) == EHELF_STOP_COUNT && EHELF_STOP_OK == 0 &&
                EHELF_STOP_NOT_EXPRESSIBLE == 3 && EHELF_STOP_NO_TABLE_YET == 9 &&
                EHELF_STOP_ROW_MISSING == 11);
  return stop < std::size(kNames) ? kNames[stop] : "?";
}

std::string kernel_walk_unavailable() {
  if (::geteuid() == 0) return {};
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return "its capabilities cannot be read";
  auto has = [&](unsigned cap) { return (data[cap / 32].effective >> (cap % 32)) & 1; };
  if (has(CAP_BPF) && has(CAP_PERFMON)) return {};
  return "it needs root, or CAP_BPF with CAP_PERFMON, to load a BPF program";
}

namespace {

struct FileTable {
  uint32_t id = 0;         // in the tables map
  RangePool::Range rows{}; // the page index, then the rows
  uint64_t row_count = 0;  // the rows alone
  uint32_t kind = EHELF_MAPPING_TABLE;
  uint64_t building = 0;         // the build under way (TableBuilder's serial), 0: built
  bool wanted = false;           // a process has mapped it (else preloaded on speculation)
  std::vector<Segment> segments; // for the bias of each mapping of it
  std::string path;              // for the stats
  uint32_t users = 0;            // processes mapping it
  std::chrono::steady_clock::time_point idle_since{}; // when `users` last fell to 0
};

// How long a table no process maps is kept: the next process of a loop that runs the same
// program (a build's compilers, a shell script's commands) maps it again within this, and its
// samples walk at once instead of waiting for the table to load again.
constexpr std::chrono::seconds kKeepIdle{2};

struct ProcessEntry {
  RangePool::Range mappings{};
  std::vector<ehelf_mapping> list; // what the range holds
  ProcAddressSpace space;          // whose mappings they are (0: unknown)
  std::set<FileKey> files;
  uint64_t written_at = 0; // when the entry was written (CLOCK_MONOTONIC ns)
};

// A program a process ran before (bpf_maps.h: ehelf_past_programs), kept while samples of it
// wait: its mappings in the pool, the files they use.
struct PastProgram {
  RangePool::Range mappings{};
  std::set<FileKey> files;
  ehelf_past_program value{};
  std::chrono::steady_clock::time_point ended;
};

// Whether the file at m.path is still the one the side band says was mapped: the same build ID.
bool same_file(const SideBandMapping& m) {
  if (m.path.empty() || m.path[0] != '/' || m.build_id.empty()) return false;
  auto elf = ElfFile::open(m.path);
  return elf && (*elf)->build_id_hex() == m.build_id;
}

bool same_mappings(const std::vector<ehelf_mapping>& a, const std::vector<ehelf_mapping>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(ehelf_mapping)) == 0);
}

// Things freed only once no walk that began before can still read them (a BPF program runs for
// microseconds; a quarter second is far beyond).
struct Retired {
  std::chrono::steady_clock::time_point at;
  RangePool* pool;
  RangePool::Range range;
  uint32_t table_id; // UINT32_MAX: none
};

// How the walk loads a file's tables: its own rows, not eh_elfs or the compact tables.
LoadPolicy table_policy(const std::vector<std::string>& debug_dirs) {
  LoadPolicy policy;
  policy.compiled = false;
  policy.compact = false;
  policy.extra_debug_dirs = debug_dirs;
  return policy;
}

// A file's identity as the walk keys its tables, from its stat(2).
void set_file_key(const struct stat& st, FileKey& key) {
  key.dev = st.st_dev;
  key.ino = st.st_ino;
  key.size = uint64_t(st.st_size);
  key.mtime_ns = uint64_t(st.st_mtim.tv_sec) * 1000000000ull + uint64_t(st.st_mtim.tv_nsec);
}

// A regular file's identity as the walk keys its tables, or nullopt.
std::optional<FileKey> file_key_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  FileKey key;
  set_file_key(st, key);
  return key;
}

// The BTF libbpf resolves the program's CO-RE relocations against (defined below).
int core_btf_memfd();

// The program's object opened against that BTF (core_btf_memfd), which libbpf reads by path
// until the object is loaded: the memfd lives as long as this.
class CoreBtf {
public:
  CoreBtf() : fd_(core_btf_memfd()), path_(fd_ >= 0 ? fmt::format("/proc/self/fd/{}", fd_) : "") {}
  ~CoreBtf() {
    if (fd_ >= 0) ::close(fd_);
  }
  CoreBtf(const CoreBtf&) = delete;
  CoreBtf& operator=(const CoreBtf&) = delete;
  // The skeleton, opened (nullptr: errno says why).
  ehelf_unwind* open() const {
    LIBBPF_OPTS(bpf_object_open_opts, options);
    if (fd_ >= 0) options.btf_custom_path = path_.c_str();
    return ehelf_unwind__open_opts(&options);
  }

private:
  int fd_;
  std::string path_;
};

} // namespace

struct KernelWalk::State {
  KernelWalkOptions options;
  ehelf_unwind* skel = nullptr;
  std::vector<int> links; // the program's links to the perf events
  ring_buffer* requests = nullptr;
  ring_buffer* copies = nullptr;
  MappedArray<ehelf_table> tables;
  MappedArray<ehelf_mapping> mappings;
  struct Shard {
    int fd = -1;
    MappedArray<ehelf_bpf_row> rows;
  };
  std::vector<std::unique_ptr<Shard>> shards;
  RangePool row_pool{0};
  RangePool mapping_pool{EHELF_MAX_MAPPINGS};
  std::vector<uint32_t> free_table_ids;
  uint32_t next_table_id = 1; // 0 stays empty: a mapping's table before it is set
  std::map<FileKey, FileTable> files;
  std::unordered_map<uint32_t, ProcessEntry> processes;
  std::vector<Retired> retired;
  std::unordered_map<uint64_t, std::pair<std::vector<uint64_t>, unsigned>> known_stacks;
  std::unordered_set<uint64_t> stacks_in_map; // counted since the stacks map was last emptied
  uint64_t chunks_in_map = 0;                 // of those
  std::unordered_set<uint32_t> pending;       // processes asked for by the program
  std::function<void(const CopiedWalk&)> on_copy;
  uint64_t replayed_generations = ~uint64_t(0); // table and process generations at the last replay
  // Processes gone while samples were parked, and since when (forget).
  std::vector<std::pair<uint32_t, std::chrono::steady_clock::time_point>> exited;
  // The replay of parked samples (unwind.bpf.c: ehelf_replay), a second copy of the object that
  // shares the first's maps and loads that program alone, off this thread, when a sample is first
  // parked: its verification (~35 ms, as long as the sampling program's) is not every run's
  // start-up, and a run that parks nothing never pays it.
  enum ReplayState { kReplayNone, kReplayLoading, kReplayReady, kReplayFailed };
  ehelf_unwind* replay_skel = nullptr;
  std::thread replay_loader;
  std::atomic<int> replay_state{kReplayNone};
  std::string replay_error; // written by the loader before kReplayFailed
  uint64_t requests_answered = 0, bytes_read = 0;
  std::unordered_map<uint32_t, std::vector<PastProgram>> past; // (program_ended)
  uint64_t programs_kept = 0;
  uint64_t next_build = 1;
  // Declared last: destroyed first, its thread stopped before what it reports to goes.
  TableBuilder builder;

  ~State() {
    if (replay_loader.joinable()) replay_loader.join();
    if (replay_skel) ehelf_unwind__destroy(replay_skel);
    for (int l : links)
      ::close(l);
    if (requests) ring_buffer__free(requests);
    if (copies) ring_buffer__free(copies);
    for (auto& s : shards)
      if (s->fd >= 0) ::close(s->fd);
    if (skel) ehelf_unwind__destroy(skel);
  }

  // The replay program loaded into replay_skel (on replay_loader's thread).
  void load_replay() {
    auto fail = [&](const std::string& why) {
      replay_error = why;
      replay_state.store(kReplayFailed, std::memory_order_release);
    };
    const CoreBtf core;
    ehelf_unwind* r = core.open();
    if (!r) return fail(fmt::format("cannot open it: {}", std::strerror(errno)));
    *r->rodata = *skel->rodata; // (the maps' are the first object's: these are what it verifies)
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, r->obj) {
      const bpf_map* theirs = bpf_object__find_map_by_name(skel->obj, bpf_map__name(map));
      if (!theirs || bpf_map__reuse_fd(map, bpf_map__fd(theirs)) != 0) {
        ehelf_unwind__destroy(r);
        return fail(fmt::format("cannot share map {}", bpf_map__name(map)));
      }
    }
    bpf_program__set_autoload(r->progs.ehelf_sample, false);
    const int loaded = ehelf_unwind__load(r);
    const int load_errno = errno;
    if (loaded != 0) {
      ehelf_unwind__destroy(r);
      return fail(fmt::format("the kernel refused it: {}", std::strerror(load_errno)));
    }
    replay_skel = r;
    replay_state.store(kReplayReady, std::memory_order_release);
  }

  Status add_shard() {
    auto shard = std::make_unique<Shard>();
    const uint32_t index = uint32_t(shards.size());
    if (index == 0) { // the program's own map (unwind.bpf.c: rows0)
      if (Status st = shard->rows.map(bpf_map__fd(skel->maps.rows0), EHELF_SHARD_ROWS, "rows"); !st)
        return st;
      shards.push_back(std::move(shard));
      row_pool.grow(EHELF_SHARD_ROWS);
      return Ok{};
    }
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE | BPF_F_INNER_MAP);
    shard->fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "ehelf_rows", sizeof(uint32_t),
                               sizeof(ehelf_bpf_row), EHELF_SHARD_ROWS, &opts);
    if (shard->fd < 0)
      return Error::plain(fmt::format("cannot make a BPF map for 2^{} rows: {}", EHELF_SHARD_BITS,
                                      std::strerror(errno)));
    if (Status st = shard->rows.map(shard->fd, EHELF_SHARD_ROWS, "rows"); !st) return st;
    if (bpf_map_update_elem(bpf_map__fd(skel->maps.row_shards), &index, &shard->fd, BPF_ANY) != 0)
      return Error::plain(
          fmt::format("cannot add rows to the BPF program: {}", std::strerror(errno)));
    shards.push_back(std::move(shard));
    row_pool.grow(uint64_t(shards.size()) * EHELF_SHARD_ROWS);
    return Ok{};
  }

  // Room for `count` rows, adding shards as needed; nullopt when the 64 shards are full.
  std::optional<RangePool::Range> allocate_rows(uint64_t count) {
    while (true) {
      if (auto r = row_pool.allocate(count)) return r;
      if (shards.size() >= EHELF_MAX_SHARDS || !add_shard()) return std::nullopt;
    }
  }

  void write_rows(uint64_t first, const std::vector<ehelf_bpf_row>& rows) {
    for (uint64_t i = 0; i < rows.size();) {
      const uint64_t index = first + i;
      Shard& shard = *shards[index >> EHELF_SHARD_BITS];
      const uint64_t slot = index & (EHELF_SHARD_ROWS - 1);
      const uint64_t n = std::min<uint64_t>(rows.size() - i, EHELF_SHARD_ROWS - slot);
      std::memcpy(shard.rows.values + slot, rows.data() + i, n * sizeof(ehelf_bpf_row));
      i += n;
    }
  }

  // The file's table if a process had it already, else a new one: built now (`now`, and the
  // vDSO) or by the builder; null if the file cannot be read.
  FileTable* file_for(uint32_t pid, const ProcMapping& m, FileKey& key, bool now = false,
                      bool by_path = false) {
    std::string open_path;
    if (m.path == "[vdso]") {
      key.vdso = m.path;
    } else {
      // The file the process maps, even deleted, replaced or in another mount namespace (pid 0,
      // or `by_path`: a file by its path, preloaded or of a process gone).
      open_path = pid && !by_path ? fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m.start, m.end)
                                  : m.path;
      struct stat st {};
      if (::stat(open_path.c_str(), &st) != 0) {
        open_path = by_path ? m.path : m.open_path(int(pid));
        if (::stat(open_path.c_str(), &st) != 0) return nullptr;
      }
      set_file_key(st, key);
    }
    if (auto it = files.find(key); it != files.end()) {
      FileTable& known = it->second;
      if (pid && !known.wanted) { // preloaded, and now mapped: built ahead of speculation
        known.wanted = true;
        if (known.building) builder.want(known.building);
      }
      return &known;
    }
    if (files.size() >= EHELF_MAX_TABLES - 1) free_idle(true); // room before kKeepIdle
    if (files.size() >= EHELF_MAX_TABLES - 1) return nullptr;

    const LoadPolicy policy = table_policy(options.debug_dirs);
    FileTable f;
    f.path = m.path;
    f.wanted = pid != 0;
    if (now || !key.vdso.empty()) { // built here, at once
      std::vector<uint8_t> image;
      if (!key.vdso.empty()) {
        // The vDSO is a few pages: anything larger is not one.
        if (m.end - m.start > (uint64_t(1) << 20)) return nullptr;
        image.resize(m.end - m.start);
        ProcessMemory memory{pid_t(pid)};
        if (!memory.read(m.start, image.data(), image.size())) return nullptr;
      }
      BuiltTable built = build_table(image.empty() ? open_path : m.path, std::move(image), policy);
      if (!built.elf) return nullptr;
      return &place_built(key, std::move(f), std::move(built));
    }
    // Built by the builder: its segments now (the headers alone), its rows when they are ready;
    // until then its table has no rows and the walk stops there ("table not loaded yet").
    const int fd = ::open(open_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    auto elf = ElfFile::open(fmt::format("/proc/self/fd/{}", fd));
    if (!elf) {
      ::close(fd);
      return nullptr;
    }
    f.segments = (*elf)->segments();
    f.id = take_table_id();
    f.building = next_build++;
    __atomic_store_n(&tables.values[f.id].rows.row_count, 0u, __ATOMIC_RELEASE);
    builder.submit({f.building, key, fd, policy, f.wanted});
    FileTable& placed = files.emplace(key, std::move(f)).first->second;
    publish(key, placed);
    return &placed;
  }

  // A file not in `files`, its table built already: placed there and installed.
  FileTable& place_built(const FileKey& key, FileTable f, BuiltTable built) {
    FileTable& placed = files.emplace(key, std::move(f)).first->second;
    install(key, placed, std::move(built));
    return placed;
  }

  // A file's table published by its inode, for the walk of a pc in no mapping written here (a
  // process that exec'd since its mappings were read, a library dlopen'd since): the kernel
  // finds the pc's file with bpf_find_vma. The vDSO, which no file names, by its address.
  void publish(const FileKey& key, const FileTable& f) {
    if (!key.vdso.empty()) return; // (refresh() publishes it with a process's address of it)
    ehelf_file value{};
    value.kind = f.kind;
    value.table = f.kind == EHELF_MAPPING_TABLE ? f.id : 0;
    for (const Segment& seg : f.segments)
      if (seg.type == PT_LOAD && (seg.flags & PF_X) && value.segment_count < EHELF_FILE_SEGMENTS)
        value.segments[value.segment_count++] = {seg.offset, seg.filesz, seg.vaddr};
    const ehelf_file_key k = kernel_key(key);
    bpf_map_update_elem(bpf_map__fd(skel->maps.files), &k, &value, BPF_ANY);
  }
  void withdraw(const FileKey& key, const FileTable& f) {
    if (!key.vdso.empty()) {
      if (f.id != 0 && skel->bss->vdso_table == f.id)
        __atomic_store_n(&skel->bss->vdso_table, 0u, __ATOMIC_RELEASE);
      return;
    }
    const ehelf_file_key k = kernel_key(key);
    bpf_map_delete_elem(bpf_map__fd(skel->maps.files), &k);
  }
  // stat(2)'s fields in the kernel's encodings (a device is MAJOR << 20 | MINOR in the kernel).
  static ehelf_file_key kernel_key(const FileKey& key) {
    ehelf_file_key k{};
    k.ino = key.ino;
    k.size = key.size;
    k.mtime_sec = int64_t(key.mtime_ns / 1000000000ull);
    k.mtime_nsec = uint32_t(key.mtime_ns % 1000000000ull);
    k.dev = uint32_t((major(key.dev) << 20) | (minor(key.dev) & 0xfffff));
    return k;
  }

  // After each change of the processes map: each CPU's copy of the entry it read last is stale
  // (unwind.bpf.c: process_generation; bumped after the change, which the program reads after
  // the generation).
  void process_changed() {
    __atomic_fetch_add(&skel->bss->process_generation, 1u, __ATOMIC_RELEASE);
  }
  // Rows the program cached before this belong to tables as they were (unwind.bpf.c: row_cache).
  void new_generation() { __atomic_fetch_add(&skel->bss->table_generation, 1u, __ATOMIC_RELEASE); }

  uint32_t take_table_id() {
    if (free_table_ids.empty()) return next_table_id++;
    const uint32_t id = free_table_ids.back();
    free_table_ids.pop_back();
    return id;
  }

  // A built table's rows written and published (or, without rows, rbp followed in its code).
  // False when it became a frame-pointer file after its mappings were published with its table.
  bool install(const FileKey& key, FileTable& f, BuiltTable built) {
    f.segments = std::move(built.segments);
    std::optional<RangePool::Range> rows;
    if (built.rows && !built.rows->rows.empty())
      rows = allocate_rows(built.rows->page_index.size() + built.rows->rows.size());
    if (!rows) {
      // Code without tables (or tables the rows cannot hold): rbp is followed.
      const bool had_table = f.id != 0;
      if (had_table) retire(&row_pool, RangePool::Range{}, f.id);
      f.id = 0;
      f.kind = EHELF_MAPPING_FRAME_POINTER;
      publish(key, f);
      return !had_table;
    }
    const BpfTable& encoded = *built.rows;
    // The page index, then the rows, in one range of the pool.
    write_rows(rows->first, encoded.page_index);
    write_rows(rows->first + encoded.page_index.size(), encoded.rows);
    f.rows = *rows;
    f.row_count = encoded.rows.size();
    if (f.id == 0) f.id = take_table_id();
    f.kind = EHELF_MAPPING_TABLE;
    ehelf_table& t = tables.values[f.id];
    t.rows.first_index = rows->first;
    t.rows.first_row = rows->first + encoded.page_index.size();
    t.rows.page_count = encoded.page_count;
    t.rows.page_shift = encoded.page_shift;
    t.base = encoded.base;
    __atomic_store_n(&t.rows.row_count, uint32_t(encoded.rows.size()), __ATOMIC_RELEASE);
    new_generation();
    publish(key, f);
    return true;
  }

  // The builder's finished tables installed; processes mapping one that turned out to have no
  // rows read again (their mappings then follow rbp in it).
  void take_built() {
    std::vector<uint32_t> again;
    for (TableBuilder::Done& d : builder.take()) {
      auto it = files.find(d.key);
      if (it == files.end() || it->second.building != d.serial) continue; // freed meanwhile
      it->second.building = 0;
      if (install(d.key, it->second, std::move(d.table))) continue;
      for (const auto& [pid, p] : processes)
        if (p.files.count(d.key)) again.push_back(pid);
    }
    for (uint32_t pid : again)
      refresh(pid);
  }

  void retire(RangePool* pool, RangePool::Range range, uint32_t table_id) {
    retired.push_back({std::chrono::steady_clock::now(), pool, range, table_id});
  }

  // Tables no process has mapped for kKeepIdle (all of them when `all`) are freed.
  void free_idle(bool all) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = files.begin(); it != files.end();) {
      FileTable& f = it->second;
      if (f.users > 0 || (!all && now - f.idle_since < kKeepIdle)) {
        ++it;
        continue;
      }
      withdraw(it->first, f);
      if (f.kind == EHELF_MAPPING_TABLE && f.id != 0) { // (being built: its result is dropped)
        __atomic_store_n(&tables.values[f.id].rows.row_count, 0u, __ATOMIC_RELEASE);
        new_generation();
        retire(&row_pool, f.rows, f.id);
      }
      it = files.erase(it);
    }
  }

  void free_retired() {
    free_idle(false);
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(retired, [&](const Retired& r) {
      if (now - r.at < std::chrono::milliseconds(250)) return false;
      if (r.range.count) r.pool->release(r.range);
      if (r.table_id != UINT32_MAX) free_table_ids.push_back(r.table_id);
      return true;
    });
  }

  void release_files(const std::set<FileKey>& keys) {
    for (const FileKey& key : keys) {
      auto it = files.find(key);
      if (it == files.end() || --it->second.users > 0) continue;
      it->second.idle_since = std::chrono::steady_clock::now(); // freed by free_idle, if unused
    }
  }

  void refresh(uint32_t pid) {
    pending.erase(pid);
    // Answered: the process's next walk that needs more asks at once, not 20 ms after this ask.
    bpf_map_delete_elem(bpf_map__fd(skel->maps.asked), &pid);
    const std::optional<ProcAddressSpace> space = proc_address_space(int(pid));
    auto maps = read_proc_maps(int(pid), /*executable_only=*/true);
    if (!maps || (maps->empty() && (!space || space->start_code == 0))) { // gone, or a zombie
      forget(pid);
      return;
    }
    // (A process of a pid that was gone: another one.)
    std::erase_if(exited, [&](const auto& e) { return e.first == pid; });
    // An exec under way: the address space changed while its maps were read, its code is not
    // all mapped yet (an exec sets start_code once it is: the maps then lack ld.so), or they show
    // no file mapped in a process that has code (the maps of an address space being replaced
    // read empty). Nothing is written: the entry of before describes another address space,
    // which the walk tells (ehelf_process: start_code), and the process's next sample asks again.
    const std::optional<ProcAddressSpace> after = proc_address_space(int(pid));
    const bool files_mapped = std::any_of(maps->begin(), maps->end(), [](const ProcMapping& m) {
      return !m.path.empty() && m.path[0] == '/';
    });
    if (space != after ||
        (after && after->start_code == 0 && after->start_stack != 0) || // mapping its code
        (after && after->start_code != 0 && !files_mapped))
      return;
    std::set<FileKey> used;
    std::vector<ehelf_mapping> list = mappings_of(pid, *maps, used);
    ehelf_process value{};
    if (after) {
      value.start_code = after->start_code;
      value.start_stack = after->start_stack;
    }
    if (install(pid, std::move(list), std::move(used), value)) {
      ProcessEntry& p = processes[pid];
      p.space = after.value_or(ProcAddressSpace{});
      p.written_at = monotonic_ns();
      ++requests_answered;
    }
  }

  // The process's mappings of files as the walk finds them (`maps`: from /proc/PID/maps, or the
  // side band's, whose files are opened `by_path`: the pid may be another process's now),
  // sorted; the files' keys into `used`, each file's users counted once.
  std::vector<ehelf_mapping> mappings_of(uint32_t pid, const std::vector<ProcMapping>& maps,
                                         std::set<FileKey>& used, bool by_path = false) {
    std::vector<ehelf_mapping> list;
    for (const ProcMapping& m : maps) {
      if (m.path.empty() || (m.path[0] == '[' && m.path != "[vdso]")) continue; // JIT, vsyscall
      FileKey key;
      FileTable* f = file_for(pid, m, key, /*now=*/false, by_path);
      if (!f) continue;
      const auto bias = load_bias(f->segments, m.start, m.offset);
      if (!bias) continue;
      ehelf_mapping e{};
      e.start = m.start;
      e.end = m.end;
      e.bias = *bias;
      e.table = f->id;
      e.kind = f->kind;
      list.push_back(e);
      if (!key.vdso.empty() && f->kind == EHELF_MAPPING_TABLE && f->id != 0 &&
          skel->bss->vdso_table != f->id) { // the vDSO for the walks that find it themselves
        skel->bss->vdso_bias_from_start = *bias - m.start;
        __atomic_store_n(&skel->bss->vdso_table, f->id, __ATOMIC_RELEASE);
      }
      if (used.insert(key).second) ++f->users;
    }
    std::sort(list.begin(), list.end(),
              [](const ehelf_mapping& a, const ehelf_mapping& b) { return a.start < b.start; });
    return list;
  }

  // `list` written as the process's mappings, the entry `value` pointing at them (its
  // first_mapping and mapping_count set here); false when nothing changed (the same mappings
  // asked again) or the pool is full, the files' users given back.
  bool install(uint32_t pid, std::vector<ehelf_mapping> list, std::set<FileKey> used,
               ehelf_process value) {
    keep_learned(pid, list);
    ProcessEntry& p = processes[pid];
    if (p.mappings.count && same_mappings(p.list, list)) {
      release_files(used);
      return false;
    }
    auto range = mapping_pool.allocate(std::max<size_t>(list.size(), 1));
    if (!range) {
      release_files(used);
      if (!p.mappings.count) processes.erase(pid);
      return false;
    }
    // Written before the process's entry points at them: the update below is a system call,
    // which orders these stores before it (no fence needed, none that ThreadSanitizer refuses).
    std::copy(list.begin(), list.end(), mappings.values + range->first);
    value.first_mapping = uint32_t(range->first);
    value.mapping_count = uint32_t(list.size());
    bpf_map_update_elem(bpf_map__fd(skel->maps.processes), &pid, &value, BPF_ANY);
    process_changed();
    if (p.mappings.count) retire(&mapping_pool, p.mappings, UINT32_MAX);
    p.mappings = *range;
    p.list = std::move(list);
    release_files(p.files);
    p.files = std::move(used);
    return true;
  }

  // A program of the process ended (its exec of another, or its exit) at `until`, begun at
  // `since` (its exec or fork): while samples of it wait in the kernel, the mappings it had are
  // kept for them (ehelf_past_programs): the process's entry when it was written in that time,
  // else those the side band gave (a file replaced since is left out).
  void program_ended(uint32_t pid, const std::vector<SideBandMapping>& side_band, uint64_t since,
                     uint64_t until) {
    if (!has_parked(pid)) return;
    std::vector<ehelf_mapping> list;
    std::set<FileKey> used;
    auto it = processes.find(pid);
    if (it != processes.end() && it->second.written_at >= since && it->second.written_at <= until) {
      list = it->second.list;
      used = it->second.files;
      for (const FileKey& key : used)
        ++files.at(key).users;
    } else {
      std::vector<ProcMapping> maps;
      for (const SideBandMapping& m : side_band) {
        if (m.path != "[vdso]" && !same_file(m)) continue;
        ProcMapping pm;
        pm.start = m.start;
        pm.end = m.end;
        pm.offset = m.offset;
        pm.executable = true;
        pm.path = m.path;
        maps.push_back(std::move(pm));
      }
      list = mappings_of(pid, maps, used, /*by_path=*/true);
    }
    if (list.empty()) {
      release_files(used);
      return;
    }
    auto range = mapping_pool.allocate(list.size());
    if (!range) {
      release_files(used);
      return;
    }
    std::copy(list.begin(), list.end(), mappings.values + range->first);
    std::vector<PastProgram>& kept = past[pid];
    if (kept.size() == EHELF_PAST_PROGRAMS) { // the oldest gives way
      retire_past(kept.front());
      kept.erase(kept.begin());
    }
    PastProgram& added = kept.emplace_back();
    added.mappings = *range;
    added.files = std::move(used);
    added.value = {since, until, uint32_t(range->first), uint32_t(list.size())};
    added.ended = std::chrono::steady_clock::now();
    write_past(pid);
    ++programs_kept;
  }

  // The process's past programs written for the walk (none: its entry deleted).
  void write_past(uint32_t pid) {
    const int fd = bpf_map__fd(skel->maps.past_programs);
    auto it = past.find(pid);
    if (it == past.end() || it->second.empty()) {
      bpf_map_delete_elem(fd, &pid);
      if (it != past.end()) past.erase(it);
      return;
    }
    ehelf_past_programs value{};
    for (size_t i = 0; i < it->second.size() && i < EHELF_PAST_PROGRAMS; ++i)
      value.programs[i] = it->second[i].value;
    bpf_map_update_elem(fd, &pid, &value, BPF_ANY);
    process_changed(); // (the replay walks again what waits)
  }

  void retire_past(PastProgram& g) {
    retire(&mapping_pool, g.mappings, UINT32_MAX);
    release_files(g.files);
  }

  // Past programs dropped once no sample of their process waits, or after the replay's patience
  // (5 s); all of them with `all`.
  void drop_past(bool all) {
    const auto now = std::chrono::steady_clock::now();
    std::vector<uint32_t> changed;
    for (auto& [pid, kept] : past) {
      const bool waiting = !all && has_parked(pid);
      const size_t before = kept.size();
      std::erase_if(kept, [&](PastProgram& g) {
        if (waiting && now - g.ended < std::chrono::seconds(5)) return false;
        retire_past(g);
        return true;
      });
      if (kept.size() != before) changed.push_back(pid);
    }
    for (uint32_t pid : changed)
      write_past(pid);
  }

  // What the program found itself in the process (unwind.bpf.c: learned) may describe what is
  // mapped no longer: only the mappings `now` still has, file, bias and table alike, are kept
  // (so that the walks of --kernel-mappings found do not learn a process's files again at every
  // read of its maps); mappings of no file, or of a file unknown then, are found again.
  void keep_learned(uint32_t pid, const std::vector<ehelf_mapping>& now) {
    const int fd = bpf_map__fd(skel->maps.learned);
    ehelf_learned learned{};
    if (bpf_map_lookup_elem(fd, &pid, &learned) != 0) return;
    ehelf_learned kept = learned;
    kept.count = kept.next = 0;
    for (uint32_t i = 0; i < std::min<uint32_t>(learned.count, EHELF_FOUND_MAPPINGS); ++i) {
      const ehelf_mapping& m = learned.found[i];
      const bool still = std::any_of(now.begin(), now.end(), [&](const ehelf_mapping& n) {
        return n.start == m.start && n.end == m.end && n.bias == m.bias && n.table == m.table &&
               n.kind == m.kind;
      });
      if (still && (m.kind == EHELF_MAPPING_TABLE || m.kind == EHELF_MAPPING_FRAME_POINTER))
        kept.found[kept.count++] = m;
    }
    if (kept.count == learned.count) return;
    if (kept.count == 0)
      bpf_map_delete_elem(fd, &pid);
    else
      bpf_map_update_elem(fd, &pid, &kept, BPF_ANY);
  }

  void inherit(uint32_t parent, uint32_t child) {
    if (processes.count(child)) return;
    // A parent not read yet is read now: a process that forks runs (a shell, a server's
    // workers' parent), and its children's first samples, in its code until they exec, come
    // before anything reads theirs (-a reads the processes on a CPU at its start, the others
    // when they are sampled: a shell that waits for its children seldom is).
    if (!processes.count(parent)) refresh(parent);
    auto it = processes.find(parent);
    if (it == processes.end()) return;
    const ProcessEntry& from = it->second;
    auto range = mapping_pool.allocate(std::max<size_t>(from.list.size(), 1));
    if (!range) return;
    std::copy(from.list.begin(), from.list.end(), mappings.values + range->first);
    // (The child has its parent's address space until it execs: the same start_code.)
    const ehelf_process value{uint32_t(range->first), uint32_t(from.list.size()), 0, 1, 0,
                              from.space.start_code,  from.space.start_stack};
    bpf_map_update_elem(bpf_map__fd(skel->maps.processes), &child, &value, BPF_ANY);
    process_changed();
    ProcessEntry p;
    p.mappings = *range;
    p.list = from.list;
    p.space = from.space;
    p.written_at = monotonic_ns();
    p.files = from.files;
    for (const FileKey& key : p.files)
      ++files.at(key).users;
    processes.emplace(child, std::move(p));
  }

  // Whether samples of the process wait in the kernel (unwind.bpf.c: parked_by_process).
  bool has_parked(uint32_t pid) const {
    uint32_t n = 0;
    return bpf_map_lookup_elem(bpf_map__fd(skel->maps.parked_by_process), &pid, &n) == 0 && n > 0;
  }

  // A process gone (exited, or its maps unreadable): forgotten, or while samples of it are
  // parked (waiting for a table it maps) kept until none is, at most 5 s (drop_exited).
  void forget(uint32_t pid) {
    if (has_parked(pid)) {
      if (std::none_of(exited.begin(), exited.end(), [&](const auto& e) { return e.first == pid; }))
        exited.emplace_back(pid, std::chrono::steady_clock::now());
      return;
    }
    drop(pid);
  }

  // The processes kept by forget dropped: all of them, or those whose samples no longer wait.
  void drop_exited(bool all) {
    if (exited.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(exited, [&](const auto& e) {
      if (!all && now - e.second < std::chrono::seconds(5) && has_parked(e.first)) return false;
      drop(e.first);
      return true;
    });
  }

  void drop(uint32_t pid) {
    auto it = processes.find(pid);
    bpf_map_delete_elem(bpf_map__fd(skel->maps.learned), &pid);
    if (it == processes.end()) return;
    bpf_map_delete_elem(bpf_map__fd(skel->maps.processes), &pid);
    process_changed();
    retire(&mapping_pool, it->second.mappings, UINT32_MAX);
    release_files(it->second.files);
    processes.erase(it);
  }
};

namespace {

// This process's interpreter (ld.so, which most programs name), as the walk checks a new
// process's against it (unwind.bpf.c: learn_interpreter): its file's key, and its build ID's
// bytes and address; nullopt when it has no build ID, or cannot be read.
std::optional<ehelf_interpreter> our_interpreter(ehelf_file_key (*kernel_key)(const FileKey&)) {
  const uint64_t base = ::getauxval(AT_BASE);
  if (base == 0) return std::nullopt;
  std::string path;
  for (const ProcMapping& m : read_proc_maps(::getpid()).value_or(std::vector<ProcMapping>{}))
    if (m.start == base && m.offset == 0 && !m.path.empty() && m.path[0] == '/') path = m.path;
  const std::optional<FileKey> key = path.empty() ? std::nullopt : file_key_of(path);
  if (!key) return std::nullopt;
  auto elf = ElfFile::open(path);
  if (!elf) return std::nullopt;
  const auto id = (*elf)->build_id();
  const std::span<const uint8_t> bytes = (*elf)->bytes();
  if (!id || id->empty() || id->data() < bytes.data() ||
      id->data() + id->size() > bytes.data() + bytes.size())
    return std::nullopt;
  const uint64_t offset = uint64_t(id->data() - bytes.data());
  ehelf_interpreter out{};
  for (const Segment& seg : (*elf)->segments())
    if (seg.type == PT_LOAD && offset >= seg.offset &&
        offset + id->size() <= seg.offset + seg.filesz)
      out.id_vaddr = seg.vaddr + (offset - seg.offset);
  if (out.id_vaddr == 0) return std::nullopt;
  out.key = kernel_key(*key);
  out.id_size = uint32_t(std::min(id->size(), sizeof(out.id)));
  std::memcpy(out.id, id->data(), out.id_size);
  return out;
}

// The BTF libbpf resolves the program's CO-RE relocations against (kernel_btf.hpp: the members it
// reads, from the kernel's BTF read here), in a memfd libbpf opens by name; -1 where it cannot be
// made, and libbpf reads the kernel's BTF whole, as it would anyway.
int core_btf_memfd() {
  auto file = KernelBtfFile::open();
  if (!file) return -1;
  auto kernel = KernelBtf::parse(file->bytes());
  if (!kernel) return -1;
  size_t size = 0;
  const void* elf = ehelf_unwind__elf_bytes(&size);
  bpf_object* object = bpf_object__open_mem(elf, size, nullptr); // (for its BTF alone)
  if (!object) return -1;
  auto bytes = core_btf(bpf_object__btf(object), *kernel);
  bpf_object__close(object);
  if (!bytes) return -1;
  const int fd = int(::syscall(SYS_memfd_create, "ehelf-core-btf", MFD_CLOEXEC));
  if (fd < 0) return -1;
  if (!write_fully(fd,
                   std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()))) {
    ::close(fd);
    return -1;
  }
  return fd;
}

} // namespace

Result<std::unique_ptr<KernelWalk>> KernelWalk::load(const KernelWalkOptions& options) {
  if (std::string why = kernel_walk_unavailable(); !why.empty())
    return Error::plain("the kernel walk cannot be loaded: " + why);
  auto s = std::make_unique<State>();
  s->options = options;
  const LibbpfLog log;
  auto failed = [&](const std::string& what) {
    std::string message = "the kernel walk's BPF program: " + what;
    if (std::string tail = log.last_lines(6); !tail.empty()) message += "\n" + tail;
    return Error::plain(std::move(message));
  };
  const CoreBtf core;
  s->skel = core.open();
  if (!s->skel) return failed(fmt::format("cannot open it: {}", std::strerror(errno)));
  s->skel->rodata->max_depth = std::clamp<uint32_t>(options.max_depth, 1, EHELF_MAX_FRAMES);
  s->skel->rodata->copy_every = options.copy_every;
  s->skel->rodata->find_mappings_only = options.find_mappings_only ? 1 : 0;
  s->skel->rodata->kernel_stacks = options.kernel_stacks ? 1 : 0;
  if (!options.park) bpf_map__set_max_entries(s->skel->maps.parked, 1);
  // Maps a run does not use are made as small as the kernel takes (their memory is allocated
  // and zeroed at load: 16 MiB of kernel stacks, 4 MiB of copies' ring).
  if (!options.kernel_stacks) bpf_map__set_max_entries(s->skel->maps.kernel_stack_traces, 1);
  if (options.copy_every == 0)
    bpf_map__set_max_entries(s->skel->maps.copies, uint32_t(::sysconf(_SC_PAGESIZE)));
  // The row cache: 2^EHELF_ROW_CACHE_BITS entries for each CPU (unwind.bpf.c: row_cache_entry).
  bpf_map__set_max_entries(s->skel->maps.row_cache,
                           uint32_t(std::max(libbpf_num_possible_cpus(), 1))
                               << EHELF_ROW_CACHE_BITS);
  // Each CPU's last walk, in two buffers of EHELF_MAX_FRAMES frames (unwind.bpf.c: memo_at).
  bpf_map__set_max_entries(s->skel->maps.walk_memo,
                           uint32_t(std::max(libbpf_num_possible_cpus(), 1))
                               << (EHELF_MAX_FRAMES_SHIFT + 1));
  // (The replay of parked samples is loaded when a sample is first parked: State::load_replay.)
  bpf_program__set_autoload(s->skel->progs.ehelf_replay, false);
  const int loaded = ehelf_unwind__load(s->skel);
  const int load_errno = errno;
  if (loaded != 0)
    return failed(fmt::format("the kernel refused it: {}", std::strerror(load_errno)));
  if (auto interpreter = our_interpreter(&State::kernel_key))
    s->skel->bss->interpreter = *interpreter;
  s->skel->bss->park_samples = options.park ? 1 : 0;
  if (Status st = s->tables.map(bpf_map__fd(s->skel->maps.tables), EHELF_MAX_TABLES, "tables"); !st)
    return std::move(st).error();
  if (Status st =
          s->mappings.map(bpf_map__fd(s->skel->maps.mappings), EHELF_MAX_MAPPINGS, "mappings");
      !st)
    return std::move(st).error();
  if (Status st = s->add_shard(); !st) return std::move(st).error();
  State* state = s.get();
  s->requests = ring_buffer__new(
      bpf_map__fd(s->skel->maps.requests),
      [](void* ctx, void* data, size_t size) {
        if (size >= sizeof(ehelf_request))
          static_cast<State*>(ctx)->pending.insert(static_cast<ehelf_request*>(data)->tgid);
        return 0;
      },
      state, nullptr);
  s->copies = ring_buffer__new(
      bpf_map__fd(s->skel->maps.copies),
      [](void* ctx, void* data, size_t size) {
        auto* st = static_cast<State*>(ctx);
        if (size < sizeof(ehelf_copy) || !st->on_copy) return 0;
        const auto* c = static_cast<const ehelf_copy*>(data);
        CopiedWalk w;
        w.tid = c->tid;
        w.ip = c->ip;
        w.sp = c->sp;
        w.time = c->time;
        w.parked = c->parked != 0;
        w.parents_space = c->parents_space != 0;
        w.stop = c->stack.stop;
        w.outside = c->outside;
        const uint32_t depth = std::min<uint32_t>(c->stack.depth, EHELF_MAX_FRAMES);
        w.user.assign(c->stack.pcs, c->stack.pcs + depth);
        st->bytes_read += sizeof(ehelf_copy);
        st->on_copy(w);
        return 0;
      },
      state, nullptr);
  if (!s->requests || !s->copies) return failed("cannot read its ring buffers");
  return std::unique_ptr<KernelWalk>(new KernelWalk(std::move(s)));
}

KernelWalk::KernelWalk(std::unique_ptr<State> state) : s_(std::move(state)) {}
KernelWalk::~KernelWalk() = default;

Status KernelWalk::attach(int perf_event_fd) {
  // Attached, not enabled: libbpf's bpf_program__attach_perf_event enables the event too
  // (PERF_EVENT_IOC_ENABLE), which began sampling before the recorder did: -p's process sampled
  // before its mappings were read (its first samples' walks stopped at "process not loaded yet"),
  // and a command's events, enabled on its exec, sampled ehelf's own forked copy before it
  // (whose files' tables were then built ahead of the command's).
  const int prog = bpf_program__fd(s_->skel->progs.ehelf_sample);
  const int link = bpf_link_create(prog, perf_event_fd, BPF_PERF_EVENT, nullptr);
  if (link >= 0) {
    s_->links.push_back(link);
    return Ok{};
  }
  // Before Linux 5.15 (no perf event links): the program set on the event, detached when the
  // event is closed.
  if (::ioctl(perf_event_fd, PERF_EVENT_IOC_SET_BPF, prog) == 0) return Ok{};
  return Error::plain(
      fmt::format("cannot attach the kernel walk to a perf event: {}", std::strerror(errno)));
}

void KernelWalk::refresh_process(uint32_t pid) {
  s_->refresh(pid);
}

void KernelWalk::inherit_process(uint32_t parent, uint32_t child) {
  s_->inherit(parent, child);
}

void KernelWalk::preload_files(const std::vector<std::string>& paths, bool now) {
  for (const std::string& path : paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    ProcMapping m;
    m.path = path;
    FileKey key;
    if (FileTable* f = s_->file_for(0, m, key, now)) ++f->users; // kept: no process releases it
  }
}

struct KernelWalk::PreparedFiles {
  struct File {
    std::string path;
    FileKey key;
    BuiltTable built;
  };
  std::vector<File> files;
};

std::shared_ptr<KernelWalk::PreparedFiles>
KernelWalk::prepare_files(const std::vector<std::string>& paths,
                          const std::vector<std::string>& debug_dirs) {
  auto prepared = std::make_shared<PreparedFiles>();
  for (const std::string& path : paths) {
    const std::optional<FileKey> key = file_key_of(path);
    if (!key) continue;
    BuiltTable built = build_table(path, {}, table_policy(debug_dirs));
    if (built.elf) prepared->files.push_back({path, *key, std::move(built)});
  }
  return prepared;
}

void KernelWalk::preload_prepared(PreparedFiles& prepared) {
  for (PreparedFiles::File& file : prepared.files) {
    // A file changed since it was built is built again (preload_files).
    if (file_key_of(file.path) != std::optional<FileKey>(file.key)) {
      preload_files({file.path}, /*now=*/true);
      continue;
    }
    FileTable* placed = nullptr;
    if (auto it = s_->files.find(file.key); it != s_->files.end()) {
      placed = &it->second;
    } else if (s_->files.size() < EHELF_MAX_TABLES - 1) {
      FileTable f;
      f.path = file.path;
      placed = &s_->place_built(file.key, std::move(f), std::move(file.built));
    }
    if (placed) ++placed->users; // kept: no process releases it
  }
}

void KernelWalk::forget_process(uint32_t pid) {
  s_->forget(pid);
}

bool KernelWalk::samples_waiting(uint32_t pid) const {
  return s_->has_parked(pid);
}

void KernelWalk::program_ended(uint32_t pid, const std::vector<SideBandMapping>& side_band,
                               uint64_t since, uint64_t until) {
  s_->program_ended(pid, side_band, since, until);
}

void KernelWalk::serve_requests() {
  s_->take_built();
  ring_buffer__consume(s_->requests);
  std::vector<uint32_t> asked(s_->pending.begin(), s_->pending.end());
  for (uint32_t pid : asked)
    s_->refresh(pid);
  s_->drop_exited(false);
  s_->drop_past(false);
  s_->free_retired();
}

void KernelWalk::hold_samples(bool held) {
  __atomic_store_n(&s_->skel->bss->held, held ? 1u : 0u, __ATOMIC_SEQ_CST);
}

bool KernelWalk::tables_building() const {
  return std::any_of(s_->files.begin(), s_->files.end(),
                     [](const auto& f) { return f.second.building != 0 && f.second.wanted; });
}

int KernelWalk::requests_fd() const {
  return ring_buffer__epoll_fd(s_->requests);
}

int KernelWalk::built_fd() const {
  return s_->builder.fd();
}

void KernelWalk::drain(const std::function<void(const KernelStack&)>& use) {
  State& s = *s_;
  // The program now counts into the other map; this one is read and emptied once the walks
  // that were writing it have ended.
  const uint32_t was = s.skel->bss->active;
  __atomic_store_n(&s.skel->bss->active, was ^ 1u, __ATOMIC_SEQ_CST);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int counts = bpf_map__fd(was ? s.skel->maps.counts1 : s.skel->maps.counts0);
  const int stacks = bpf_map__fd(s.skel->maps.stacks);
  const int kernel = bpf_map__fd(s.skel->maps.kernel_stack_traces);
  std::vector<ehelf_count_key> keys;
  ehelf_count_key key{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(counts, first ? nullptr : &key, &next) == 0) {
    keys.push_back(next);
    key = next;
    first = false;
  }
  KernelStack out;
  std::vector<uint64_t> kernel_pcs(EHELF_KERNEL_FRAMES);
  ehelf_stack_chunk chunk{};
  // The stack `hash` from the stacks map, chunk by chunk (bpf_maps.h), into `pcs`; false when a
  // chunk is missing (the map had no room for it).
  std::vector<uint64_t> pcs;
  auto read_stack = [&](uint64_t hash, unsigned& stop) {
    ehelf_stack_key sk{hash, 0, 0};
    if (bpf_map_lookup_elem(stacks, &sk, &chunk) != 0) return false;
    s.bytes_read += sizeof(sk) + sizeof(chunk);
    const uint32_t depth = std::min<uint32_t>(chunk.depth, EHELF_MAX_FRAMES);
    stop = chunk.stop;
    pcs.assign(depth, 0);
    for (uint32_t i = 0; i * EHELF_STACK_CHUNK < depth; ++i) {
      sk.chunk = i;
      if (i && bpf_map_lookup_elem(stacks, &sk, &chunk) != 0) return false;
      if (i) s.bytes_read += sizeof(sk) + sizeof(chunk);
      const uint32_t n = std::min<uint32_t>(EHELF_STACK_CHUNK, depth - i * EHELF_STACK_CHUNK);
      std::copy(chunk.pcs, chunk.pcs + n, pcs.begin() + i * EHELF_STACK_CHUNK);
    }
    return true;
  };
  for (const ehelf_count_key& k : keys) {
    ehelf_count value{};
    if (bpf_map_lookup_elem(counts, &k, &value) != 0) continue;
    bpf_map_delete_elem(counts, &k);
    s.bytes_read += sizeof(k) + sizeof(value);
    auto known = s.known_stacks.find(k.stack);
    if (known == s.known_stacks.end()) {
      unsigned stop = 0;
      if (!read_stack(k.stack, stop)) continue;
      known = s.known_stacks.emplace(k.stack, std::make_pair(pcs, stop)).first;
    }
    if (s.stacks_in_map.insert(k.stack).second)
      s.chunks_in_map += std::max<size_t>(1, (known->second.first.size() + EHELF_STACK_CHUNK - 1) /
                                                 EHELF_STACK_CHUNK);
    out.pid = k.pid;
    out.tid = k.tid;
    out.space_since = k.space_since;
    out.comm.assign(value.comm, strnlen(value.comm, sizeof(value.comm)));
    out.samples = value.samples;
    out.period = value.period;
    out.user = known->second.first;
    out.stop = known->second.second;
    out.kernel.clear();
    if (k.kernel >= 0) {
      const uint32_t id = uint32_t(k.kernel);
      if (bpf_map_lookup_elem(kernel, &id, kernel_pcs.data()) == 0)
        for (uint64_t pc : kernel_pcs) {
          if (pc == 0) break;
          // The event samples callchains (PERF_SAMPLE_CALLCHAIN), so bpf_get_stackid copies the
          // sample's, whose kernel part begins with the PERF_CONTEXT_KERNEL marker: not a frame
          // (named after the last BPF symbol below the top of the address space, before).
          if (pc >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) continue;
          out.kernel.push_back(pc);
        }
    }
    use(out);
  }
  // The stacks map keeps what the program put in it, so that a stack seen again costs it a
  // lookup, not an insertion. Once half full, the stacks read here leave it (those still in use
  // come back at their next sample), leaving room for as many new ones before the next drain;
  // those not read yet stay, for the counts the program is writing now.
  if (s.chunks_in_map >= EHELF_MAX_STACK_CHUNKS / 2) {
    std::vector<ehelf_stack_key> read;
    ehelf_stack_key stack_key{}, next_stack{};
    for (bool start = true;
         bpf_map_get_next_key(stacks, start ? nullptr : &stack_key, &next_stack) == 0;
         start = false) {
      if (s.known_stacks.count(next_stack.stack)) read.push_back(next_stack);
      stack_key = next_stack;
    }
    // (A walk may store a stack again while its chunks leave, and a part of it may stay: the
    // stacks evicted are those read here, which are never read from the map again.)
    for (const ehelf_stack_key& key : read)
      bpf_map_delete_elem(stacks, &key);
    s.stacks_in_map.clear();
    s.chunks_in_map = 0;
  }
}

void KernelWalk::replay_parked(bool final) {
  replay(final);
  if (final) {
    s_->drop_exited(true);
    s_->drop_past(true);
  }
}

void KernelWalk::replay(bool final) {
  State& s = *s_;
  // Only when a table or a process was published or withdrawn since the last run: what the
  // waiting samples wait for. (A sample waiting longer than the program's patience is counted at
  // the next run, or at the end.)
  const uint64_t generations =
      uint64_t(__atomic_load_n(&s.skel->bss->table_generation, __ATOMIC_ACQUIRE)) << 32 |
      __atomic_load_n(&s.skel->bss->process_generation, __ATOMIC_ACQUIRE);
  if (!final && generations == s.replayed_generations) return;
  if (__atomic_load_n(&s.skel->bss->parked_waiting, __ATOMIC_ACQUIRE) == 0) return;
  if (s.replay_state.load(std::memory_order_acquire) == State::kReplayNone) {
    s.replay_state.store(State::kReplayLoading, std::memory_order_relaxed);
    s.replay_loader = std::thread([&s] { s.load_replay(); });
  }
  if (final && s.replay_loader.joinable()) s.replay_loader.join();
  // At the end, the tables being built that processes map (what the waiting samples may wait
  // for) are waited for, at most 5 s (a large one, built by a sanitized ehelf beside other work).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (final && tables_building() && std::chrono::steady_clock::now() < until) {
    pollfd ready{built_fd(), POLLIN, 0};
    ::poll(&ready, 1, 50);
    serve_requests();
  }
  if (s.replay_state.load(std::memory_order_acquire) != State::kReplayReady) return;
  s.replayed_generations = generations;
  // (A run takes each waiting sample once: more than one only at the end, for those parked
  // while it ran.)
  for (int run = 0; run < (final ? 4 : 1); ++run) {
    if (__atomic_load_n(&s.skel->bss->parked_waiting, __ATOMIC_ACQUIRE) == 0) return;
    __atomic_store_n(&s.skel->bss->replay_round, s.skel->bss->replay_round + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&s.skel->bss->replay_final, final ? 1u : 0u, __ATOMIC_RELEASE);
    LIBBPF_OPTS(bpf_test_run_opts, run_options);
    if (bpf_prog_test_run_opts(bpf_program__fd(s.replay_skel->progs.ehelf_replay), &run_options) !=
        0)
      return; // (the samples stay parked; counted as not loaded, below, at the end)
  }
}

void KernelWalk::take_copies(const std::function<void(const CopiedWalk&)>& use) {
  s_->on_copy = use;
  ring_buffer__consume(s_->copies);
  s_->on_copy = nullptr;
}

KernelWalkStats KernelWalk::stats() const {
  const State& s = *s_;
  KernelWalkStats out;
  const int fd = bpf_map__fd(s.skel->maps.stats);
  const int cpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(size_t(std::max(cpus, 1)));
  auto total = [&](uint32_t index) {
    uint64_t sum = 0;
    if (bpf_map_lookup_elem(fd, &index, per_cpu.data()) == 0)
      for (uint64_t v : per_cpu)
        sum += v;
    return sum;
  };
  out.samples = total(EHELF_STAT_SAMPLES);
  out.frames = total(EHELF_STAT_FRAMES);
  out.requests_lost = total(EHELF_STAT_REQUESTS_LOST);
  out.counts_full = total(EHELF_STAT_COUNTS_FULL);
  out.stacks_full = total(EHELF_STAT_STACKS_FULL);
  out.copies_lost = total(EHELF_STAT_COPIES_LOST);
  out.parked = total(EHELF_STAT_PARKED);
  out.park_full = total(EHELF_STAT_PARK_FULL);
  out.replayed = total(EHELF_STAT_REPLAYED);
  out.found_interpreter = total(EHELF_STAT_INTERPRETER);
  out.found_files = total(EHELF_STAT_VMA_FILES) + out.found_interpreter;
  out.found_unknown = total(EHELF_STAT_VMA_UNKNOWN);
  out.row_misses = total(EHELF_STAT_ROW_MISSES);
  out.stack_reads = total(EHELF_STAT_STACK_READS);
  out.memo_frames = total(EHELF_STAT_MEMO_FRAMES);
  out.memo_changed = total(EHELF_STAT_MEMO_CHANGED);
  for (unsigned i = 0; i < kWalkStopCount; ++i)
    out.stops[i] = total(EHELF_STAT_STOPS + i);
  for (unsigned i = 0; i < out.not_expressible.size(); ++i)
    out.not_expressible[i] = total(EHELF_STAT_NOT_EXPRESSIBLE + i);
  for (const auto& [key, f] : s.files) {
    ++out.files;
    out.rows += f.row_count;
    out.row_bytes += f.rows.count * sizeof(ehelf_bpf_row);
    if (f.row_count > out.largest_file_rows) {
      out.largest_file_rows = f.row_count;
      out.largest_file = f.path;
    }
  }
  out.processes = s.processes.size();
  for (const auto& [pid, p] : s.processes)
    out.mappings += p.mappings.count;
  out.requests = s.requests_answered;
  out.programs_kept = s.programs_kept;
  out.bytes_read = s.bytes_read;
  bpf_prog_info info{};
  uint32_t info_size = sizeof(info);
  if (bpf_obj_get_info_by_fd(bpf_program__fd(s.skel->progs.ehelf_sample), &info, &info_size) == 0) {
    out.runs = info.run_cnt;
    out.run_time_ns = info.run_time_ns;
  }
  info = {};
  info_size = sizeof(info);
  if (s.replay_state.load(std::memory_order_acquire) == State::kReplayReady &&
      bpf_obj_get_info_by_fd(bpf_program__fd(s.replay_skel->progs.ehelf_replay), &info,
                             &info_size) == 0) {
    out.replay_runs = info.run_cnt;
    out.replay_time_ns = info.run_time_ns;
  }
  if (s.replay_state.load(std::memory_order_acquire) == State::kReplayFailed)
    out.replay_error = s.replay_error;
  return out;
}

} // namespace ehelf::bpf
