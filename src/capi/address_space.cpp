#include "capi/address_space.hpp"

#include <algorithm>
#include <atomic>
#include <endian.h>
#include <mutex>
#include <new>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include "capi/backtrace.hpp"
#include "capi/thread_caches.hpp"
#include "capi/walk_stack.hpp"
#include "model/dw_op.hpp"
#include "runtime/proc_files.hpp"
#include "runtime/process_probe.hpp"
#include "runtime/registered_frames.hpp"

namespace ehelf::capi {

namespace {

// The local walker never loads (everything is loaded when the space is built) and holds no
// cache (a rule cache is mutable: shared by threads it would need a lock); Auto: the fastest
// backend where a step needs only the pc and the stack (unw_backtrace), the interpreter where a
// cursor asks for every register (GeneralStep::step_every_register).
StepOptions local_options() {
  StepOptions o;
  o.allow_loading = false;
  return o;
}

// Modules that are the same mapping of the same file keep their loaded data.
void reuse_data(const ModuleMap& from, ModuleMap& to) {
  for (Module& m : to.modules())
    for (const Module& o : from.modules())
      if (o.data && o.path == m.path && o.bias == m.bias && o.start == m.start && o.end == m.end) {
        m.data = o.data;
        break;
      }
}
std::atomic<LocalSpace*> g_local{nullptr};
std::mutex g_local_mutex;

// A space over this process's modules as dl_iterate_phdr lists them now, each module's rows
// found on demand in its loaded image (ModuleMap::load_in_memory): no file is opened and no
// table built, so this costs microseconds. Allocates and lists modules under the loader's lock:
// never from a signal handler (see address_space.hpp).
// Set by ehelf_unw_preload: spaces are built with whole and compact tables.
bool g_whole_tables = false;

LocalSpace* build_local_space(LocalSpace* previous) {
  try {
    ModuleMap map = ModuleMap::for_self();
    if (previous) reuse_data(previous->map, map);
    map.load_in_memory(g_whole_tables);
    create_thread_caches_key();
    create_walk_stack_key();
    // The DW_OP table is built on first use (it holds names): now, not in a handler's walk.
    (void)dw_op_name(0);
    auto* fresh = new LocalSpace(std::move(map));
    g_local.store(fresh, std::memory_order_release);
    return fresh; // the old space is deliberately leaked: see address_space.hpp
  } catch (...) {
    return previous;
  }
}

// Rebuilds the space if a library was loaded or unloaded since it was built (unw_flush_cache).
LocalSpace* refresh_local_space() {
  std::lock_guard<std::mutex> lock(g_local_mutex);
  LocalSpace* s = g_local.load(std::memory_order_acquire);
  if (s && !s->map.stale_for_self()) return s;
  return build_local_space(s);
}

// ehelf_unw_preload: a space whose modules have whole and compact tables (the modules of the
// current space do not, unless it was preloaded too: nothing is reused).
LocalSpace* preload_local_space() {
  std::lock_guard<std::mutex> lock(g_local_mutex);
  LocalSpace* s = g_local.load(std::memory_order_acquire);
  if (s && g_whole_tables && !s->map.stale_for_self()) return s;
  g_whole_tables = true;
  return build_local_space(nullptr);
}

// At load: the space, and the loading thread's stack bounds (usually the main thread's, whose
// first walk then reads no /proc file).
__attribute__((constructor)) void build_local_space_at_load() {
  (void)local_space();
  (void)current_thread_stack();
}

} // namespace

constinit unw_addr_space g_local_space_object{.local = true};

LocalSpace::LocalSpace(ModuleMap m) : map(std::move(m)), walker(map, local_options()) {
  map.set_late_source(&late);
  map.set_registered_source(&registered_frames());
}

// It is built when the library is loaded (above), so walks, also the first of the process
// inside a signal handler, only read it; built here only if a walk comes before that (another
// library's constructor), under a lock.
LocalSpace* local_space() {
  if (LocalSpace* s = g_local.load(std::memory_order_acquire)) return s;
  std::lock_guard<std::mutex> lock(g_local_mutex);
  if (LocalSpace* s = g_local.load(std::memory_order_acquire)) return s;
  return build_local_space(nullptr);
}

bool known_pc(const ModuleMap& map, uint64_t pc) {
  return map.find(pc - 1) || map.find(pc);
}

// The ranges local unwinding reads directly: the thread's stack and the alternate signal stack.
void local_ranges(LocalMemory& mem) {
  mem.add(thread_stack_at(walk_caller_sp()));
  mem.add(walk_stack_range());
  stack_t ss{};
  if (::sigaltstack(nullptr, &ss) == 0 && !(ss.ss_flags & SS_DISABLE) && ss.ss_sp) {
    uint64_t lo = reinterpret_cast<uint64_t>(ss.ss_sp);
    mem.add(AddressRange{lo, lo + ss.ss_size});
  }
}

bool SelfMemory::read(uint64_t addr, void* out, size_t size) {
  if (stacks.read(addr, out, size)) return true;
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(addr), size};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

bool AccessorMemory::read(uint64_t addr, void* out, size_t size) {
  auto* dst = static_cast<uint8_t*>(out);
  uint64_t end = addr + size;
  if (end < addr || !as_->accessors.access_mem) return false;
  for (uint64_t at = addr & ~uint64_t(7); at < end; at += 8) {
    unw_word_t word = 0;
    if (as_->accessors.access_mem(as_, at, &word, 0, arg_) != 0) return false;
    for (unsigned b = 0; b < 8; ++b) {
      uint64_t a = at + b;
      if (a >= addr && a < end) dst[a - addr] = static_cast<uint8_t>(word >> (8 * b));
    }
    if (at + 8 < at) break; // the last word of the address space
  }
  return true;
}

// ---- finding the remote process ------------------------------------------------------------

// The process the accessors read: ehelf's _UPT_ handle names it; otherwise the one process this
// process traces whose memory at the stack pointer and pc is what access_mem returns.
pid_t find_pid(unw_addr_space* as, void* arg, const RegisterState& regs) {
  pid_t pid = 0;
  if (upt_pid(as->accessors, arg, pid)) return pid;
  AccessorMemory through(as, arg);
  const uint64_t probes[2] = {regs.get(x86_64::RSP), regs.get(x86_64::RIP)};
  uint64_t expected[2] = {};
  for (int i = 0; i < 2; ++i)
    if (!through.read_u64(probes[i], expected[i])) return 0;
  return find_traced_process(probes, expected);
}

// Makes `as` describe process `pid`, rebuilding its map if the process's mappings changed.
bool ensure_remote_map(unw_addr_space* as, pid_t pid) {
  std::string maps;
  if (!read_proc_file("/proc/" + std::to_string(pid) + "/maps", maps)) return false;
  if (as->map && as->pid == pid && as->maps_text == maps) return true;
  auto built = ModuleMap::for_process(pid);
  if (!built) return false;
  auto map = std::make_unique<ModuleMap>(std::move(*built));
  if (as->map) {
    reuse_data(*as->map, *map);
    as->old_maps.push_back(std::move(as->map));
    as->old_walkers.push_back(std::move(as->walker));
  }
  as->map = std::move(map);
  // Remote cursors step with every register (the interpreter), loading module data through the
  // accessors when a walk first meets a module.
  StepOptions o;
  o.backend = BackendKind::Interpreter;
  as->walker = std::make_unique<GeneralStep>(*as->map, o);
  as->pid = pid;
  as->maps_text = std::move(maps);
  return true;
}

// ---- address spaces ------------------------------------------------------------------------

unw_addr_space* create_space(const unw_accessors_t* accessors, int byteorder) {
  if (!accessors) return nullptr;
  if (byteorder != 0 && byteorder != __LITTLE_ENDIAN) return nullptr; // x86_64 only
  auto* as = new (std::nothrow) unw_addr_space;
  if (!as) return nullptr;
  as->accessors = *accessors;
  return as;
}

void destroy_space(unw_addr_space* as) {
  if (as && !as->local) delete as;
}

unw_accessors_t* accessors_of(unw_addr_space* as) {
  return as ? &as->accessors : nullptr;
}

void flush_cache(unw_addr_space* as) {
  if (!as) return;
  if (as->local) {
    // Rebuilds the map now if a library was loaded or unloaded, so that a program can do it
    // after dlopen, outside the signal handlers it unwinds from.
    (void)refresh_local_space();
    return;
  }
  as->maps_text.clear(); // the next unw_init_remote re-reads /proc/PID/maps
}

int preload_local() {
  LocalSpace* s = preload_local_space();
  return s && s->map.modules().size() &&
                 std::any_of(s->map.modules().begin(), s->map.modules().end(),
                             [](const Module& m) { return m.data && m.data->has_table(); })
             ? UNW_ESUCCESS
             : -UNW_ENOMEM;
}

int set_caching_policy(unw_addr_space* as, unw_caching_policy_t policy) {
  if (!as) return -UNW_EINVAL;
  if (policy != UNW_CACHE_NONE && policy != UNW_CACHE_GLOBAL && policy != UNW_CACHE_PER_THREAD)
    return -UNW_EINVAL;
  // No walker caches rules for cursors (they step with the interpreter) and the local one
  // caches none at all (its walk is lock-free); module data stays loaded whatever the policy.
  as->policy = policy;
  return UNW_ESUCCESS;
}

} // namespace ehelf::capi
