// The address spaces behind ehelf's libunwind C API (libunwind.cpp holds the exported
// functions, each a cast and one call into address_space, cursor, proc_info or backtrace).
//
// Local address space (this process). One process-wide LocalSpace: a ModuleMap of the loaded
// modules, each with its rows found on demand in its loaded image (ModuleMap::load_in_memory:
// the .eh_frame_hdr search table and .eh_frame in memory, no file opened, no table built), and
// one walker over it, a GeneralStep that never loads and holds no rule cache: cursors step with
// it (every register), unw_backtrace runs the fast walk over it with the calling thread's own
// rule cache (backtrace.cpp). It is built when the library is loaded (a constructor: outside any
// signal handler, in microseconds), so the first unwind of a process or of a thread may be in a
// signal handler. The rule:
//
//   * unw_init_local(2), unw_step, unw_backtrace, unw_get_reg, unw_get_save_loc,
//     unw_is_signal_frame and unw_get_proc_info only read the LocalSpace: no locks, no
//     allocation, no dl_iterate_phdr, safe in signal handlers and from many threads at once
//     (unw_backtrace writes only to the calling thread's own rule cache, which its first call in
//     a thread maps with mmap, and the thread's exit unmaps; a thread's stack bounds come from
//     /proc/self/maps read with plain system calls);
//   * a pc in a library loaded after the space was built is found when a walk first meets it
//     (LateModules: the loader's _r_debug list read with process_vm_readv, no lock, a fixed
//     number of slots made ahead); a pc in no module is JIT code when following rbp from it
//     leads on (a frame, unwound by rbp: unw_step returns 1), else (not code at all, or a
//     library met while the loader's list is changing) it ends the walk like the outermost
//     frame: unw_step returns 0; such a library dlclosed and replaced at its address is noticed
//     by its image's fingerprint (LateModules::check_slot_at: before a cursor steps in it, after
//     unw_backtrace walked through it, which then walks again) and found anew;
//   * unw_init_local(2), unw_step and unw_backtrace run on the calling thread's walk stack
//     (walk_stack.hpp, mapped on the thread's first walk): a few hundred bytes of the caller's
//     stack, so that a handler on an 8 KiB alternate signal stack can unwind;
//   * unw_resume installs a local cursor's registers (resume.hpp): no allocation, at most the
//     rt_sigreturn system call, so a signal handler may resume the frame it interrupted;
//   * unw_flush_cache(unw_local_addr_space, 0, 0) rebuilds the space when libraries were loaded
//     or unloaded (dl_iterate_phdr: not for signal handlers);
//   * ehelf_unw_preload() rebuilds it with whole and compact tables made from each module's
//     found rows (accelerators for rule-cache misses; later rebuilds keep making them);
//   * unw_get_proc_name names as `ehelf stack` and eu-stack do, from a module's separate debug
//     file too (Symbolizer): its first call for a module opens files, under a mutex, so it is
//     not for signal handlers (nor is libunwind's);
//   * a replaced LocalSpace is never freed: cursors made before the rebuild may still use it
//     (module data shared with the new map is not duplicated).
//
// Remote address spaces read registers and memory through the caller's accessors; their module
// map comes from /proc/PID/maps, where PID is the process behind ehelf's _UPT_ handle or else the
// one process traced by the caller whose memory matches what the accessors return.
#pragma once

#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "ehelf/libunwind.h"
#include "model/register_state.hpp"
#include "runtime/general_step.hpp"
#include "runtime/late_modules.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/symbolize.hpp"

// The object behind unw_addr_space_t.
struct unw_addr_space {
  bool local = false;
  unw_accessors_t accessors{};
  unw_caching_policy_t policy = UNW_CACHE_GLOBAL; // kept for the caller; module data is cached
  // Remote spaces: the current process's modules and the walker over them.
  pid_t pid = 0;
  std::string maps_text; // /proc/PID/maps when `map` was built
  std::unique_ptr<ehelf::ModuleMap> map;
  std::unique_ptr<ehelf::GeneralStep> walker;
  std::unique_ptr<ehelf::Symbolizer> names; // remote: made on first use (see symbolizer_of)
  // Replaced maps and walkers, kept until the space is destroyed (cursors may point into them).
  std::vector<std::unique_ptr<ehelf::ModuleMap>> old_maps;
  std::vector<std::unique_ptr<ehelf::GeneralStep>> old_walkers;
};

namespace ehelf::capi {

struct LocalSpace {
  explicit LocalSpace(ModuleMap m);
  LateModules late; // libraries loaded after the space was built, found when first met
  ModuleMap map;
  // The one walker (see above): cursors' steps, unw_backtrace's fast walk and its general step.
  GeneralStep walker;
};

// The object behind unw_local_addr_space.
extern unw_addr_space g_local_space_object;

// The current LocalSpace (built at load; built here, under a lock, only if a walk comes before
// that); null when it cannot be built. The already-built space is read without any lock.
LocalSpace* local_space();

// Whether a caller's pc is in a known module; a pc in none (JIT code, not code, or code loaded
// since the map was made) is a frame only when following rbp from it leads on.
bool known_pc(const ModuleMap& map, uint64_t pc);

// The ranges local unwinding reads directly: the thread's stack and the alternate signal stack.
void local_ranges(LocalMemory& mem);

// This process's memory: a plain copy inside the known stack ranges; elsewhere (a coroutine's
// stack, say) through process_vm_readv on ourselves, a system call that fails instead of
// faulting on unmapped memory.
class SelfMemory final : public MemoryReader {
public:
  bool read(uint64_t addr, void* out, size_t size) override;
  LocalMemory stacks;
};

// Reads through the accessors' access_mem, an aligned word at a time.
class AccessorMemory final : public MemoryReader {
public:
  AccessorMemory(unw_addr_space* as, void* arg) : as_(as), arg_(arg) {}
  bool read(uint64_t addr, void* out, size_t size) override;

private:
  unw_addr_space* as_;
  void* arg_;
};

// The process the accessors read: ehelf's _UPT_ handle names it; otherwise the one process this
// process traces whose memory at the stack pointer and pc is what access_mem returns.
pid_t find_pid(unw_addr_space* as, void* arg, const RegisterState& regs);
// Makes `as` describe process `pid`, rebuilding its map if the process's mappings changed.
bool ensure_remote_map(unw_addr_space* as, pid_t pid);

unw_addr_space* create_space(const unw_accessors_t* accessors, int byteorder);
void destroy_space(unw_addr_space* as);
unw_accessors_t* accessors_of(unw_addr_space* as);
void flush_cache(unw_addr_space* as);
// ehelf_unw_preload: the local space rebuilt with whole and compact tables of every module.
int preload_local();
int set_caching_policy(unw_addr_space* as, unw_caching_policy_t policy);

// upt.cpp: the process id behind `arg` when the accessors are ehelf's _UPT_ helpers.
bool upt_pid(const unw_accessors_t& accessors, void* arg, pid_t& pid);

} // namespace ehelf::capi
