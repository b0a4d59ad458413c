// SampleUnwinder: turns the records of a perf.data file into call stacks. It follows the
// recorded processes (mmap, comm, fork, exit, in time order) to know each process's modules
// and thread names, and unwinds each sample's user stack from its register set and stack copy
// with the runtime's sample walk over the copy where perf stored it (Unwinder::backtrace_sample),
// kernel frames coming from the sample's callchain.
//
// Module files are the ones on this machine at the recorded paths, used only when their build id
// matches the one perf recorded (else perf's build-id cache, ~/.debug/.build-id, is tried); the
// vDSO is this process's when its build id matches. A frame in a module without a usable file
// ends the walk with a reason, as perf does.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "perf/kernel_symbols.hpp"
#include "perf/perf_data.hpp"
#include "perf/perf_map.hpp"
#include "perf/sample_stack.hpp"
#include "runtime/symbolize.hpp"
#include "runtime/unwinder.hpp"

namespace ehelf::perf {

struct SampleUnwinderOptions {
  BackendKind backend = BackendKind::Auto;
  size_t max_depth = 512;
  bool kernel = true;      // kernel frames (from the callchain) above the user frames
  bool symbols = true;     // name frames
  bool demangle = true;    // C++ names demangled without parameters, as perf prints them
  std::string buildid_dir; // perf's build-id cache; empty: $PERF_BUILDID_DIR, else ~/.debug
  // Where separate debug files are looked up before /usr/lib/debug (LoadPolicy): a module stripped
  // of its unwind tables takes them from its debug file there (`ehelf synth -o`).
  std::vector<std::string> debug_dirs;
};

// What a recording says about itself that unwinding uses: the build ids perf recorded per file
// (HEADER_BUILD_ID) and the kernel release (for /proc/kallsyms' names). A live recording (ehelf
// record) has none of either: module files are checked against the build ids in MMAP2 records.
struct RecordingInfo {
  std::vector<BuildIdEntry> build_ids;
  std::string os_release;
};

// A process's executable mappings at some time, shared copy-on-write.
struct ProcessMaps;

// A sample's call stack as addresses (SampleUnwinder::feed_raw): what a profiler sees per sample.
// `maps` are the process's maps of the sample's time, valid until the next record is fed;
// `maps_id` tells them apart from any other maps of the run (a key for distinct stacks).
struct RawStack {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  uint64_t period = 1;
  std::vector<uint64_t> kernel; // innermost first
  std::vector<uint64_t> user;   // the sampled pc, then return addresses
  StopReason stop = StopReason::None;
  bool user_walked = false; // `user` came from a walk over a stack copy (stop says how it ended)
  const ProcessMaps* maps = nullptr;
  uint64_t maps_id = 0;
};

// One user frame of a raw stack tied to what names it, so that it can be named after the
// process's maps have changed or it has exited: the module holding it (interned by the
// SampleUnwinder, which keeps its data alive), the mapping and the address perf prints.
struct ResolvedFrame {
  uint64_t pc = 0;
  bool return_address = false; // named by its call (pc - 1)
  const Module* module = nullptr;
  const FileMapping* mapping = nullptr; // the mapping as recorded, or null
  uint64_t dso_address = 0;
  // A return address from a frame-pointer call chain (perf record -g): printed at the address
  // the chain holds (dso_address + 1), as perf script prints it.
  bool recorded = false;
};
// A raw stack resolved (SampleUnwinder::resolve): what a profile keeps per distinct stack. It
// costs O(frames) to make and holds nothing of the process's maps.
struct ResolvedStack {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0, period = 1;
  std::vector<uint64_t> kernel;
  std::vector<ResolvedFrame> user;
  StopReason stop = StopReason::None;
  bool user_walked = false;
};

// A sample's stack before naming (SampleUnwinder::prepare): what the process's state at the
// sample's time gives (the thread's name, kernel pcs, user frames tied to their modules and
// mappings, why the walk ended), so that it can be named later, on another thread
// (SampleUnwinder::name_prepared), into what feed() gives.
struct PreparedStack {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0, period = 1;
  std::string comm;
  std::vector<uint64_t> kernel;    // innermost first
  std::vector<ResolvedFrame> user; // innermost first
  std::string_view stop;           // a static string
  bool ip_only = false;
};

// Counts for a summary line.
struct UnwindStats {
  uint64_t samples = 0;
  uint64_t user_samples = 0; // with a user register set and stack
  uint64_t frames = 0;
  uint64_t stopped_early = 0;   // walks that ended for another reason than the end of the stack
  uint64_t modules_missing = 0; // mapped files without a usable copy here
};

class SampleUnwinder {
public:
  SampleUnwinder(const PerfData& data, SampleUnwinderOptions options = {});
  SampleUnwinder(RecordingInfo info, SampleUnwinderOptions options = {});
  ~SampleUnwinder();

  // Feeds one record (in time order: see RecordStream); returns true and fills `out` for a
  // sample. The same as prepare() then name_prepared().
  bool feed(const Record& r, SampleStack& out);
  // Feeds one record as feed() does, but a sample's stack is only prepared (returns true);
  // name_prepared() names it as feed() would have. In between, more records may be prepared,
  // and the two may run on two threads at once: prepare() touches only the processes' state,
  // name_prepared() only the naming state (names, symbols, kernel symbols, spare frames), and
  // the modules and mappings a prepared stack points to stay as they are.
  bool prepare(const Record& r, PreparedStack& out);
  void name_prepared(const PreparedStack& in, SampleStack& out);
  // The same as addresses only, for samples (returns true and fills `out`); other records update
  // the processes. Nothing is named.
  bool feed_raw(const Record& r, RawStack& out);
  // Ties a stack from the last feed_raw to the modules and mappings that name its frames.
  ResolvedStack resolve(const RawStack& raw);
  // A stack walked elsewhere (ehelf record's in-kernel walk: `out`'s pid, tid, user and kernel
  // pcs are set) made a raw stack of process `out.pid` as it is now: its maps, counted as
  // `samples` samples of `frames` frames each. `since` (record time, 0: unknown): when the
  // process first ran the program the stack was sampled in; the maps are that program's when
  // the process has exec'd another since (of its last 64 programs).
  void adopt_raw(RawStack& out, uint64_t samples, uint64_t since = 0);
  // A program process `pid` ran, as the records fed so far describe it: the one it ran at record
  // time `time` (its present one, or one of its last 64 before an exec), when it began (the exec
  // or fork that made it; 0: before the recording) and its executable file mappings (none: a
  // process no record described).
  struct Program {
    uint64_t began = 0;
    std::vector<FileMapping> mappings;
  };
  Program program_at(uint32_t pid, uint64_t time) const;
  // Names a resolved stack (the command name too) as feed() would have: the same SampleStack.
  // Names are looked up once per distinct (module, address).
  void name_stack(const ResolvedStack& stack, std::string_view comm, SampleStack& out);
  // The command name of a thread now (at the time of the records fed so far).
  std::string comm_of(uint32_t pid, uint32_t tid) const;
  // Kernel names read elsewhere (ehelf record reads /proc/kallsyms while its command runs),
  // instead of on the first kernel frame named.
  void set_kernel_symbols(KernelSymbols symbols) {
    kernel_symbols_ = std::move(symbols);
    kernel_symbols_loaded_ = true;
  }

  // The kernel image's code, [_stext, _etext), from the kernel names read; {0, 0} if unknown.
  std::pair<uint64_t, uint64_t> kernel_text() const { return kernel_symbols_.text_range(); }

  const UnwindStats& stats() const { return stats_; }
  // Steps that ran the interpreter, by why (Unwinder::slow_steps), over every process.
  SlowSteps slow_steps() const;
  // Frames in no module (JIT code) unwound by following rbp, over every process.
  uint64_t frames_outside_modules() const;

private:
  struct Process;
  struct LoadedFile;
  struct PcFrame;
  // The user frame at `pc` in p's current maps (looked up by its call unless `exact`): resolved,
  // and tested for a signal trampoline, once per (pc, kind) per version of the maps.
  PcFrame& frame_at(Process& p, uint64_t pc, bool exact);
  Process& process(uint32_t pid);
  // Whether `lookup` is in a signal trampoline's FDE ('S' augmentation: __restore_rt): the pc
  // under it is then the interrupted instruction. Asked of every frame named, so answered once
  // per (module, address).
  bool in_signal_trampoline(const ModuleMap& map, uint64_t lookup);
  // The build id perf recorded for the kernel (empty if none).
  std::vector<uint8_t> kernel_build_id() const;
  // A kernel frame at `pc`, named from the kernel's symbols (read on first use), written over
  // `f` (its strings' storage reused).
  void kernel_frame(uint64_t pc, StackFrame& f);
  // out.frames[n], made when out has fewer (from spare_frames_ when it has some); trim() gives
  // frames beyond n back. In a stream of samples no frame's strings are allocated twice.
  StackFrame& frame_slot(SampleStack& out, size_t n);
  void trim(SampleStack& out, size_t n);
  void on_mmap(const MmapRecord& m);
  void on_comm(const CommRecord& c, uint64_t time);
  void on_fork(const TaskRecord& t);
  void on_exit(const TaskRecord& t);
  void prepare_sample(const Record& r, const SampleRecord& s, PreparedStack& out);
  // The sample's kernel frames (from its callchain) into `pcs`.
  void kernel_pcs(const Record& r, const SampleRecord& s, std::vector<uint64_t>& pcs) const;
  // Walks the sample's user stack copy: the sampled pc, then return addresses.
  StopReason walk_user(Process& p, const SampleRecord& s, std::vector<uint64_t>& pcs);
  // Rebuilds the process's module map (and drops its rule cache) after mappings changed.
  void refresh(Process& p);
  std::shared_ptr<const ModuleData> data_for(const MmapRecord& m, std::string& path_used,
                                             uint64_t& bias);
  // A frame tied to its module and mapping now, and named (once per (module, address)).
  ResolvedFrame resolve_frame(const ProcessMaps& maps, const ModuleMap& map, uint64_t pc,
                              bool return_address);
  // The frame's name, made once per (module, address) and kept (pc: the first one named).
  const StackFrame& named_frame(uint32_t pid, const ResolvedFrame& r);
  void name_resolved(uint32_t pid, const ResolvedFrame& r, StackFrame& f);
  // The kernel frames named, then the user ones, into out.frames (in place: name_stack and
  // name_prepared).
  void name_frames(uint32_t pid, std::span<const uint64_t> kernel,
                   std::span<const ResolvedFrame> user, SampleStack& out);

  RecordingInfo info_;
  SampleUnwinderOptions options_;
  std::map<uint32_t, std::unique_ptr<Process>> processes_;
  std::map<uint32_t, std::string> comms_;                          // by tid
  std::map<std::string, std::vector<uint8_t>> recorded_build_ids_; // by file name
  std::map<std::string, std::unique_ptr<LoadedFile>> files_;       // by path + build id
  Symbolizer symbolizer_{AliasChoice::Perf};                       // perf's names for aliases
  KernelSymbols kernel_symbols_;
  bool kernel_symbols_loaded_ = false;
  // Kernel names being read on another thread since the recording was opened (a recording whose
  // events count kernel time), taken on the first kernel frame; empty otherwise.
  std::shared_ptr<std::future<KernelSymbols>> kernel_symbols_pending_;
  UnwindStats stats_;
  // Modules and mapped paths that resolved frames point to, kept for naming (node-based: stable).
  std::map<std::tuple<const ModuleData*, uint64_t, uint64_t, std::string>, Module> interned_;
  std::set<FileMapping> file_mappings_;
  struct NamedKey {
    const Module* module;
    uint64_t lookup;
    uint32_t pid; // 0 for code in a module; the process for code in none
    bool operator==(const NamedKey&) const = default;
  };
  // An object and an address in it (multiplied by 2^64 / phi: addresses differ in low bits).
  static size_t hash_address_in(const void* object, uint64_t address) {
    return std::hash<const void*>()(object) ^ (address * 0x9e3779b97f4a7c15ull);
  }
  struct NamedKeyHash {
    size_t operator()(const NamedKey& k) const {
      return hash_address_in(k.module, k.lookup) ^ k.pid;
    }
  };
  // By lookup; node-based, so references stay valid as it grows.
  std::unordered_map<NamedKey, StackFrame, NamedKeyHash> named_;
  ModuleMap empty_map_; // what Symbolizer::name takes; resolved modules come loaded
  // Demangled names by mangled name (views into symbol tables that interned_ keeps).
  std::unordered_map<std::string_view, std::string> demangled_;
  std::vector<uint64_t> pcs_;             // a sample's pcs, reused from sample to sample
  PreparedStack prepared_;                // feed()'s, reused from sample to sample
  std::vector<StackFrame> spare_frames_;  // frames trimmed off samples, their strings kept
  GeneralRegLayout reg_layout_;           // for the last sample's register mask
  std::vector<uint64_t> walk_buffer_;     // max_depth pcs, what a walk writes into
  std::map<uint32_t, PerfMap> perf_maps_; // JIT symbols by pid, read on first use
  struct ModuleAddressHash {
    size_t operator()(const std::pair<const ModuleData*, uint64_t>& k) const {
      return hash_address_in(k.first, k.second);
    }
  };
  std::unordered_map<std::pair<const ModuleData*, uint64_t>, bool, ModuleAddressHash>
      signal_trampolines_;
};

} // namespace ehelf::perf
