// ModuleMap: which ELF module holds an address, and that module's unwinding data.
//
// Built from this process (dl_iterate_phdr), another process (/proc/PID/maps) or a given list
// (perf samples). Each module's data (unwind table, compact table, compiled eh_elf if the cache
// has one for its build-id, symbols) is loaded on first use or all at once with load_all(), which
// a signal-safe user calls before unwinding.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dwarf/row_lookup.hpp"
#include "eh_elf/eh_elf_object.hpp"
#include "elf/elf_file.hpp"
#include "model/memory_reader.hpp"
#include "model/unwind_table.hpp"
#include "runtime/backend_kind.hpp"
#include "runtime/compact_table.hpp"
#include "runtime/rule_cache.hpp"
#include "support/result.hpp"

namespace ehelf {

// What to load for each module.
struct LoadPolicy {
  bool compiled = true;    // look for an eh_elf in the cache (load_cached_eh_elf(build_id))
  bool compact = true;     // build the compact table
  bool symbols = true;     // keep the ELF for symbol names
  bool debug_frame = true; // also read .debug_frame (own or separate debug file)
  // Where separate debug files are looked up before the system's (/usr/lib/debug): a module
  // without unwind tables of its own takes a debug file's .eh_frame or .debug_frame, as `ehelf
  // synth -o` writes them, found by build id (DIR/.build-id/xx/yyyy.debug) or .gnu_debuglink.
  std::vector<std::string> extra_debug_dirs;
  // Build the whole UnwindTable (and from it the compact table). Off: a module with an
  // .eh_frame_hdr search table gets only its RowLookup, and each pc's row is found when first
  // needed; modules without one are still read whole.
  bool whole_table = true;

  // What a walk with `backend` uses: eh_elfs where it may run compiled code (auto, compiled),
  // the compact table where it may use it (all but the interpreter).
  static LoadPolicy for_backend(BackendKind backend) {
    LoadPolicy p;
    p.compiled = backend == BackendKind::Auto || backend == BackendKind::Compiled;
    p.compact = backend != BackendKind::Interpreter;
    return p;
  }
};

// The unwinding data of one module. Immutable once loaded.
struct ModuleData {
  std::vector<uint8_t> image; // the module's bytes when read from memory (vDSO)
  std::unique_ptr<ElfFile> elf;
  std::optional<UnwindTable> table;
  CompactTable compact;
  std::vector<HotRule> hot; // hot_form() of each compact rule, what a rule-cache fill copies
  std::unique_ptr<EhElfObject> compiled;
  // Rows found on demand through the module's .eh_frame_hdr: over the file's sections (`rows`),
  // or, for this process's modules (`loaded`), over a copy of the loaded image's search table
  // and .eh_frame, each page copied (process_vm_readv) when a lookup first reads it; the copy
  // never goes away, so a library unmapped under a walk can make a lookup fail, never fault.
  RowLookup rows;
  // The search table `rows` uses when the module has none of its own (made_search_table: linked
  // without .eh_frame_hdr, or a header that lists no FDE).
  std::vector<uint8_t> made_hdr;
  struct LoadedCfi {
    uint64_t hdr = 0, hdr_size = 0; // AVMAs in this process (0: none)
    uint64_t eh_frame = 0, end = 0; // .eh_frame to the end of the segment holding it
    uint64_t bias = 0;
  } loaded;
  // The RowLookup to use (null: none). Async-signal-safe and lock-free: the first call for a
  // loaded module maps and fills the copy (mmap, process_vm_readv), later ones read it.
  const RowLookup* row_lookup() const {
    if (rows.usable()) return &rows;
    if (!loaded.hdr) return nullptr;
    if (const RowLookup* r = loaded_rows_.load(std::memory_order_acquire))
      return r->usable() ? r : nullptr;
    return copy_loaded_rows();
  }
  // The largest copy made (a hostile or absurd segment is not copied).
  static constexpr uint64_t kMaxLoadedCopy = uint64_t(256) << 20;
  std::string error; // why there is no table, if there is none
  bool has_table() const { return table && !table->ranges().empty(); }
  bool has_rows() const { return rows.usable() || loaded.hdr; }
  // Any unwind data: a table or rows on demand.
  bool has_unwind_data() const { return has_table() || has_rows(); }
  // For a LateModules slot given to another library: the rows of the loaded image are found
  // again from `loaded`, in a copy of their own. The old copy stays mapped (a walk that began
  // before may still read it).
  void forget_loaded_rows() {
    loaded = {};
    loaded_rows_.store(nullptr, std::memory_order_release);
  }
  // The function (FDE) holding `svma`, from the table or found on demand.
  std::optional<FunctionInfo> function_at(uint64_t svma) const;

private:
  const RowLookup* copy_loaded_rows() const;
  mutable std::atomic<const RowLookup*> loaded_rows_{nullptr};
};

struct Module {
  std::string path; // file name, or "[vdso]"
  // Where the file is read when `path` no longer names it (a deleted file: its
  // /proc/PID/map_files entry); empty: `path`.
  std::string open_path;
  uint64_t start = 0; // executable range, actual addresses (AVMA)
  uint64_t end = 0;
  uint64_t bias = 0; // AVMA - SVMA
  bool vdso = false;
  uint64_t image_addr = 0; // where the whole ELF image is mapped, for modules read from memory
  uint64_t image_size = 0;
  // This process's modules (for_self): where the loaded image holds its .eh_frame_hdr
  // (PT_GNU_EH_FRAME) and the end of the segment holding it, as AVMAs (0: none). Rows are
  // then found in memory, without opening the file (ModuleMap::load_in_memory).
  uint64_t cfi_hdr = 0, cfi_hdr_size = 0, cfi_segment_end = 0;
  // Loaded on first use (ModuleMap::load): filling it in does not change which module this is,
  // so a const Module (as find() gives) can be loaded.
  mutable std::shared_ptr<const ModuleData> data;
};

// The unwinding data of one ELF file, or of an ELF image already in memory (`name` for
// messages): what ModuleMap::load makes for a module, for callers that have no map. Errors are
// in the result's `error` (the data is then empty), as for a module.
std::shared_ptr<const ModuleData> load_module(const std::string& path,
                                              const LoadPolicy& policy = {});
std::shared_ptr<const ModuleData> load_module_image(std::vector<uint8_t> image,
                                                    const std::string& name,
                                                    const LoadPolicy& policy = {});

// The bias (AVMA - SVMA) of a file mapped at `map_start` from `file_offset`: the PT_LOAD segment
// holding that offset says which SVMA it has. None if no segment holds it.
std::optional<uint64_t> load_bias(const ElfFile& elf, uint64_t map_start, uint64_t file_offset);
// The same from the file's segments (kept where the file is not).
std::optional<uint64_t> load_bias(std::span<const Segment> segments, uint64_t map_start,
                                  uint64_t file_offset);

// Modules a map learns of after it was made (LateModules: this process's dlopen'd libraries).
struct LateModuleSource {
  virtual const Module* find(uint64_t pc) const = 0;

protected:
  ~LateModuleSource() = default;
};

// The RowLookup over `m`'s loaded image (this process: m.cfi_hdr), if it has a usable search
// table. Allocation-free.
void find_rows_in_memory(const Module& m, ModuleData& data);
// The compact table of data.table, and the hot form of each of its rules.
void add_compact_table(ModuleData& data);

class ModuleMap {
public:
  // This process's modules (executable segments), including the vDSO.
  static ModuleMap for_self();
  // Another process's modules from /proc/PID/maps; the vDSO is read through `memory`.
  static Result<ModuleMap> for_process(int pid);

  void add(Module m) {
    modules_.push_back(std::move(m));
    spans_.clear(); // find() searches modules_ until finish()
    generation_.renew();
  }
  void finish(); // sorts and indexes; call after add() or after changing modules' ranges

  const Module* find(uint64_t pc) const {
    if (const Module* m = find_listed(pc)) [[likely]]
      return m;
    return find_unlisted(pc);
  }
  // Where find() looks for pcs in none of the listed modules (null: nowhere), not owned: the
  // frames the program registered (RegisteredFrames: a lookup in memory), then the libraries
  // loaded since the map was made (LateModules: may read the loader's list).
  void set_late_source(const LateModuleSource* late) { late_ = late; }
  void set_registered_source(const LateModuleSource* registered) { registered_ = registered; }
  // Differs between any two maps, and changes with add(), finish() and copies: what was taken
  // from modules() (RuleCache's module memo) holds while the generation does.
  uint64_t generation() const { return generation_.value; }
  const std::vector<Module>& modules() const { return modules_; }
  std::span<Module> modules() { return modules_; } // to change a range, call finish() after

  // Loads the data of every module (or one) now. `memory` reads module images that have no
  // file (the vDSO of another process).
  void load_all(const LoadPolicy& policy = {}, MemoryReader* memory = nullptr);
  const ModuleData& load(const Module& m, const LoadPolicy& policy = {},
                         MemoryReader* memory = nullptr);
  // This process's modules: the data of each is the RowLookup over its loaded image (no file
  // is opened, nothing is parsed ahead); a module without a usable search table there (no
  // PT_GNU_EH_FRAME, or a header listing no FDE) gets rows through a table made from its file's
  // .eh_frame when the file holds what is loaded (8 bytes per FDE), else an empty data object
  // (frame pointers). A few small allocations per module: call outside signal handlers.
  // `whole_tables`: also the whole table and the compact table of each, made from the found
  // rows (RowLookup::whole_table): the accelerators a rule-cache miss then fills from cheaply.
  void load_in_memory(bool whole_tables = false);

  // dl_iterate_phdr's load/unload counters when the map was made (in-process maps only).
  uint64_t adds() const { return adds_; }
  uint64_t subs() const { return subs_; }
  // True if this process has loaded or unloaded a library since for_self().
  bool stale_for_self() const;

private:
  const Module* find_listed(uint64_t pc) const;
  // find() past the listed modules: the registered frames, then the late libraries (out of
  // line: find() is inlined into every step).
  const Module* find_unlisted(uint64_t pc) const;

  const LateModuleSource* late_ = nullptr;
  const LateModuleSource* registered_ = nullptr;
  std::vector<Module> modules_;
  // [start, end) of each module, in order, for find()'s search (built by finish(), dropped by
  // add(): find() searches modules_ meanwhile).
  std::vector<std::pair<uint64_t, uint64_t>> spans_;
  // The modules of the last two find()s: consecutive frames are mostly in one or two. Relaxed
  // atomics: a map shared by threads that unwind at once (the C API's) may race on it harmlessly.
  struct RelaxedIndex {
    std::atomic<size_t> value{0};
    RelaxedIndex() = default;
    RelaxedIndex(const RelaxedIndex& o) : value(o.value.load(std::memory_order_relaxed)) {}
    RelaxedIndex& operator=(const RelaxedIndex& o) {
      value.store(o.value.load(std::memory_order_relaxed), std::memory_order_relaxed);
      return *this;
    }
  };
  mutable RelaxedIndex last_hit_, previous_hit_;
  // A new value from a process-wide counter when made, copied or renewed; a move keeps it.
  struct Generation {
    uint64_t value = next();
    Generation() = default;
    Generation(const Generation&) {}
    Generation(Generation&&) = default;
    Generation& operator=(const Generation&) {
      renew();
      return *this;
    }
    Generation& operator=(Generation&&) = default;
    void renew() { value = next(); }
    static uint64_t next();
  } generation_;
  uint64_t adds_ = 0, subs_ = 0;
};

// Inline: the rule cache's fill calls it for every miss.
inline const Module* ModuleMap::find_listed(uint64_t pc) const {
  size_t hit = last_hit_.value.load(std::memory_order_relaxed);
  if (const size_t count = spans_.size()) { // == modules_.size(): see add()
    const std::pair<uint64_t, uint64_t>* spans = spans_.data();
    if (hit < count && pc - spans[hit].first < spans[hit].second - spans[hit].first)
      return &modules_[hit];
    // The module before that: walks alternate between two (a program and libc, say).
    size_t before = previous_hit_.value.load(std::memory_order_relaxed);
    if (before < count && pc - spans[before].first < spans[before].second - spans[before].first) {
      previous_hit_.value.store(hit, std::memory_order_relaxed);
      last_hit_.value.store(before, std::memory_order_relaxed);
      return &modules_[before];
    }
    size_t lo = 0, n = count; // the last span starting at or below pc
    while (n > 1) {
      size_t half = n / 2;
      if (spans[lo + half].first <= pc) lo += half;
      n -= half;
    }
    if (pc - spans[lo].first >= spans[lo].second - spans[lo].first) return nullptr;
    previous_hit_.value.store(hit, std::memory_order_relaxed);
    last_hit_.value.store(lo, std::memory_order_relaxed);
    return &modules_[lo];
  }
  const size_t count = modules_.size();
  if (count == 0) return nullptr;
  const Module& last = modules_[hit < count ? hit : 0];
  if (pc >= last.start && pc < last.end) return &last;
  auto it = std::upper_bound(modules_.begin(), modules_.end(), pc,
                             [](uint64_t p, const Module& m) { return p < m.start; });
  if (it == modules_.begin()) return nullptr;
  --it;
  if (pc >= it->end) return nullptr;
  last_hit_.value.store(static_cast<size_t>(it - modules_.begin()), std::memory_order_relaxed);
  return &*it;
}

} // namespace ehelf
