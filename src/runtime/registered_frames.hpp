// RegisteredFrames: call-frame information a program hands over at run time, as libgcc_s's
// __register_frame family takes it (JIT compilers register each object's .eh_frame so that
// exceptions and backtraces pass through the code they generate: LLVM's RuntimeDyld and ORC,
// GCC's libgccjit). Each registration becomes a module a walk finds by pc (a LateModuleSource
// of this process's ModuleMap), with rows found on demand as in a loaded library.
//
// A registration's records are copied when it is registered (read with process_vm_readv: a bad
// pointer is refused, never a fault) and its FDEs indexed with a search table made for them, so
// lookups read only ehelf's own memory. Lookups take no lock and do not allocate: the index of
// (FDE range -> registration) is read under a sequence counter, and what a lookup may hold (a
// registration's module, its copy, the index arrays) is never freed, only reused for a later
// registration once its own was removed. As with libgcc, a program must not unwind through
// frames it is deregistering. Registering and removing take a mutex and allocate (not for
// signal handlers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/module_map.hpp"

namespace ehelf {

class RegisteredFrames final : public LateModuleSource {
public:
  // What a program registers: `begin` is an .eh_frame (CIEs and FDEs up to a zero length word:
  // __register_frame, __register_frame_info) or, with `table`, a null-terminated array of
  // pointers to FDEs (__register_frame_info_table). `object` is the caller's storage, given back
  // by remove(); text_base and data_base resolve DW_EH_PE_textrel and datarel pointers.
  struct Registration {
    const void* begin = nullptr;
    void* object = nullptr;
    uint64_t text_base = 0, data_base = 0;
    bool table = false;
  };
  // Limits on what one registration may make us copy and index (a JIT's object holds a few
  // thousand FDEs; libgcc takes no more than a bad pointer lets it read).
  static constexpr uint64_t kMaxBytes = uint64_t(64) << 20;
  static constexpr uint64_t kMaxTableEntries = uint64_t(1) << 20;

  // `process_wide`: the process's registry (registered_frames()), whose changes are also counted
  // in g_registered_frames_generation.
  explicit RegisteredFrames(bool process_wide = false);
  ~RegisteredFrames();
  RegisteredFrames(const RegisteredFrames&) = delete;
  RegisteredFrames& operator=(const RegisteredFrames&) = delete;

  // Registers; false when nothing of it can be unwound (empty, unreadable, no FDE with a range,
  // past the limits: it is registered all the same, for remove() to give its object back). A
  // `begin` registered twice is two registrations, each removed by one remove().
  bool add(const Registration& r);
  // Removes the registration of `begin`, giving back its `object`; none if there is none.
  std::optional<void*> remove(const void* begin);

  // The registration whose FDEs cover `pc`, as a module (bias 0, rows over the copy,
  // data->loaded.eh_frame the registered address). Lock-free, allocation-free.
  const Module* find(uint64_t pc) const override;
  // Changes with every add and remove: what was derived from registered frames (a thread's rule
  // cache, its rows) is stale when it differs.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  size_t size() const;

private:
  struct Slot;
  struct Range {
    uint64_t start = 0, end = 0;
    const Slot* slot = nullptr;
  };
  // An array of ranges lookups search, under its own sequence counter (odd while a writer
  // rewrites it). Writers rewrite only the index lookups are not directed to (two take turns),
  // so a writer that is preempted, or interrupted by a signal handler that unwinds, never makes
  // a lookup wait: a lookup retries only when the index it read was rewritten meanwhile.
  struct Index {
    struct Entry {
      std::atomic<uint64_t> start{0}, end{0};
      std::atomic<const Slot*> slot{nullptr};
    };
    explicit Index(size_t n) : capacity(n), entries(std::make_unique<Entry[]>(n)) {}
    std::atomic<uint64_t> sequence{0};
    std::atomic<size_t> count{0};
    const size_t capacity;
    const std::unique_ptr<Entry[]> entries;
  };
  void publish(); // ranges_ into the spare index, which then becomes the current one

  mutable std::mutex writers_;
  std::vector<std::unique_ptr<Slot>> slots_; // every slot made (never freed: lookups may hold one)
  std::vector<Slot*> free_;                  // slots whose registration was removed
  std::vector<Range> ranges_;                // the index as writers keep it, sorted by start
  // Every index made: never freed (a lookup may still read one). An index outgrown is replaced
  // by one twice its size, so all of them together are a few times the largest.
  std::vector<std::unique_ptr<Index>> indexes_;
  Index* spare_ = nullptr;
  std::atomic<Index*> current_{nullptr};
  std::atomic<size_t> registered_ranges_{0}; // 0: lookups return at once
  std::atomic<uint64_t> generation_{0};
  const bool process_wide_;
};

// This process's registered frames (one for the process: registrations outlive any module map).
RegisteredFrames& registered_frames();
// registered_frames().generation(), read without making it (a walk's caches check it on every
// claim: one load, no call).
inline constinit std::atomic<uint64_t> g_registered_frames_generation{0};

} // namespace ehelf
