// The machinery behind ehelf's libunwind C API (libunwind.cpp holds the exported functions, each
// a cast and one call into this).
//
// Local address space (this process). One process-wide LocalSpace: a ModuleMap of the loaded
// modules, each with its rows found on demand in its loaded image (ModuleMap::load_in_memory:
// the .eh_frame_hdr search table and .eh_frame in memory, no file opened, no table built), and
// Unwinders that never load and share no rule cache. It is built when the library is loaded (a
// constructor: outside any signal handler, in microseconds), so the first unwind of a process
// or of a thread may be in a signal handler. The rule:
//
//   * unw_init_local(2), unw_step, unw_backtrace, unw_get_reg, unw_is_signal_frame and
//     unw_get_proc_info only read the LocalSpace: no locks, no allocation, no dl_iterate_phdr,
//     safe in signal handlers and from many threads at once (unw_backtrace writes only to the
//     calling thread's own rule cache, which its first call in a thread maps with mmap, and the
//     thread's exit unmaps; a thread's stack bounds come from /proc/self/maps read with plain
//     system calls);
//   * a pc in a library loaded after the space was built is found when a walk first meets it
//     (LateModules: the loader's _r_debug list read with process_vm_readv, no lock, a fixed
//     number of slots made ahead); a pc in no module (JIT code, not code at all, or a library
//     met while the loader's list is changing) ends the walk like the outermost frame:
//     unw_step returns 0;
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
#include "runtime/late_modules.hpp"
#include "runtime/process_probe.hpp"
#include "runtime/memory.hpp"
#include "runtime/module_map.hpp"
#include "runtime/symbolize.hpp"
#include "runtime/unwinder.hpp"

// The object behind unw_addr_space_t.
struct unw_addr_space {
  bool local = false;
  unw_accessors_t accessors{};
  unw_caching_policy_t policy = UNW_CACHE_GLOBAL;
  // Remote spaces: the current process's modules and the unwinder over them.
  pid_t pid = 0;
  std::string maps_text; // /proc/PID/maps when `map` was built
  std::unique_ptr<ehelf::ModuleMap> map;
  std::unique_ptr<ehelf::Unwinder> unwinder;
  std::unique_ptr<ehelf::Symbolizer> names; // remote: made on first use (see symbolizer_of)
  // Replaced maps and unwinders, kept until the space is destroyed (cursors may point into them).
  std::vector<std::unique_ptr<ehelf::ModuleMap>> old_maps;
  std::vector<std::unique_ptr<ehelf::Unwinder>> old_unwinders;
};

namespace ehelf::capi {

struct LocalSpace {
  explicit LocalSpace(ModuleMap m);
  LateModules late; // libraries loaded after the space was built, found when first met
  ModuleMap map;
  Unwinder unwinder; // cursors: the interpreter, every register
  // unw_backtrace: pcs only. `fast` walks with the calling thread's own rule cache (its internal
  // one is never used, so threads share it without locks); `general` steps without any cache
  // where that walk cannot go (see backtrace_from).
  Unwinder fast;
  Unwinder general;
};

// What unw_cursor_t holds. Trivially copyable: libunwind allows copying cursors with memcpy.
struct Cursor {
  static constexpr uint32_t kMagic = 0x65684355; // "UCeh"
  uint32_t magic = kMagic;
  bool remote = false;
  bool exact = false; // regs.rip is an interrupted instruction, not a return address
  bool done = false;  // the walk reached its end
  unw_addr_space* as = nullptr;
  void* arg = nullptr;         // remote: unw_init_remote's argument
  LocalSpace* local = nullptr; // local: the space the walk started with
  RegisterState regs;          // the current frame
  uint32_t range_count = 0;    // local: the readable stack ranges
  AddressRange ranges[LocalMemory::kMaxRanges];
};

Cursor* cursor_of(unw_cursor_t* cursor);
// The object behind unw_local_addr_space.
extern unw_addr_space g_local_space_object;

int init_local(unw_cursor_t* cursor, const unw_context_t* context, bool exact);
int init_remote(unw_cursor_t* cursor, unw_addr_space* as, void* arg);
int step(Cursor& c);
// unw_backtrace from its caller's registers (backtrace.S).
int backtrace_from(const WalkStart& caller, void** buffer, int size);

int get_reg(Cursor& c, int reg, unw_word_t* value);
int set_reg(Cursor& c, int reg, unw_word_t value);
int get_save_loc(Cursor& c, int reg, unw_save_loc_t* loc);
int is_signal_frame(Cursor& c);
int get_proc_info(Cursor& c, unw_proc_info_t* info);
int get_proc_name(Cursor& c, char* buf, size_t size, unw_word_t* offset);
int proc_info_by_ip(unw_addr_space* as, unw_word_t ip, unw_proc_info_t* info, void* arg);
int proc_name_by_ip(unw_addr_space* as, unw_word_t ip, char* buf, size_t size, unw_word_t* offset,
                    void* arg);

unw_addr_space* create_space(const unw_accessors_t* accessors, int byteorder);
void destroy_space(unw_addr_space* as);
unw_accessors_t* accessors_of(unw_addr_space* as);
void flush_cache(unw_addr_space* as);
// ehelf_unw_preload: the local space rebuilt with whole and compact tables of every module.
int preload_local();
int set_caching_policy(unw_addr_space* as, unw_caching_policy_t policy);

const char* error_text(int error);
const char* register_name(int reg);

// upt.cpp: the process id behind `arg` when the accessors are ehelf's _UPT_ helpers.
bool upt_pid(const unw_accessors_t& accessors, void* arg, pid_t& pid);

} // namespace ehelf::capi
