#include "capi/unwind_impl.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <endian.h>
#include <mutex>
#include <new>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <type_traits>
#include <unistd.h>

namespace ehelf::capi {

// ---- the cursor ----------------------------------------------------------------------------

// As LLVM libunwind's check_fit: the C++ cursor must fit the C one.
static_assert(sizeof(Cursor) <= sizeof(unw_cursor_t), "unw_cursor_t is too small for Cursor");
static_assert(alignof(Cursor) <= alignof(unw_cursor_t), "unw_cursor_t is under-aligned");
static_assert(std::is_trivially_copyable_v<Cursor>, "cursors are copied with memcpy");

Cursor* cursor_of(unw_cursor_t* cursor) {
  return std::launder(reinterpret_cast<Cursor*>(cursor));
}

namespace {

// unw_context_t is a ucontext_t: gregs slot of each DWARF register. getcontext.S stores them at
// these offsets.
constexpr int kGregOfDwarf[x86_64::kGeneralRegs] = {
    REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
    REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 40, "getcontext.S assumes gregs at 40");
static_assert(REG_R8 == 0 && REG_RDI == 8 && REG_RBX == 11 && REG_RAX == 13 && REG_RSP == 15 &&
                  REG_RIP == 16,
              "getcontext.S assumes glibc's gregs order");

// Cursors step with the interpreter, which evaluates every register's rule, so that unw_get_reg
// gives callers' callee-saved registers (r12-r15 too); unw_backtrace, which needs only the pcs,
// takes the fastest backend (compiled eh_elf, else the compact table).
UnwinderOptions local_options(BackendKind backend) {
  UnwinderOptions o;
  o.backend = backend;
  o.allow_loading = false; // everything is loaded when the space is built
  o.use_cache = false;     // the rule cache is mutable: shared by threads it would need a lock
  return o;
}

// unw_backtrace's fast walk: with a rule cache, always the calling thread's own (ThreadRules),
// and as deep as the caller's buffer, as libunwind's.
UnwinderOptions fast_options() {
  UnwinderOptions o = local_options(BackendKind::Auto);
  o.use_cache = true;
  o.max_depth = SIZE_MAX;
  return o;
}

UnwinderOptions remote_options(unw_caching_policy_t policy) {
  UnwinderOptions o;
  o.backend = BackendKind::Interpreter;
  o.use_cache = policy != UNW_CACHE_NONE;
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

// ---- unw_backtrace's rule caches -----------------------------------------------------------

// A thread's rule cache for unw_backtrace's fast walk. It lives in pages of its own (mmap, which
// is async-signal-safe: a thread's first unw_backtrace may be in a signal handler, where malloc
// is not allowed) and is unmapped when the thread exits (g_rules_key's destructor).
struct ThreadRules {
  const LocalSpace* space = nullptr; // the space whose modules the rules describe
  // A walk is using `rules`: a signal handler that interrupted it must not change them under it.
  volatile sig_atomic_t busy = 0;
  RuleCache rules;
};

// One pointer of static TLS: initial-exec, so that reading it never calls __tls_get_addr, which
// may allocate the first time a thread touches a dlopened library's TLS.
thread_local ThreadRules* t_rules __attribute__((tls_model("initial-exec"))) = nullptr;

// glibc keeps a thread's values of keys below this (PTHREAD_KEY_2NDLEVEL_SIZE) in the thread
// descriptor; for higher keys pthread_setspecific callocs a block on a thread's first use.
constexpr pthread_key_t kKeysStoredInline = 32;

pthread_key_t g_rules_key;
// The key exists and pthread_setspecific stores it without allocating. Otherwise (a program that
// made 32 keys before us) a thread's cache outlives the thread.
bool g_rules_key_usable = false;

void unmap_thread_rules(void* rules) {
  t_rules = nullptr; // a later unw_backtrace on this thread (another key's destructor) maps anew
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ::munmap(rules, sizeof(ThreadRules));
}

// Once, while the first LocalSpace is built (under g_local_mutex, outside signal handlers).
void create_rules_key() {
  static bool done = false;
  if (done) return;
  done = true;
  g_rules_key_usable = ::pthread_key_create(&g_rules_key, unmap_thread_rules) == 0 &&
                       g_rules_key < kKeysStoredInline;
}

// The calling thread's ThreadRules, mapped on first use; null if mmap failed.
ThreadRules* thread_rules() {
  if (t_rules) return t_rules;
  void* p = ::mmap(nullptr, sizeof(ThreadRules), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* rules = new (p) ThreadRules;
  if (g_rules_key_usable) ::pthread_setspecific(g_rules_key, rules);
  t_rules = rules;
  return rules;
}

// The calling thread's cache, marked busy and holding rules of `s` only (after a rebuild of the
// space, the old rules may describe unloaded code); null when there is none or it is busy, i.e.
// this call interrupted a walk of this thread.
ThreadRules* claim_rules(const LocalSpace& s) {
  ThreadRules* rules = thread_rules();
  if (!rules || rules->busy) return nullptr;
  rules->busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (rules->space != &s) {
    rules->rules.clear();
    rules->space = &s;
  }
  return rules;
}

void release_rules(ThreadRules& rules) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  rules.busy = 0;
}

std::atomic<LocalSpace*> g_local{nullptr};
std::mutex g_local_mutex;

// A space over this process's modules as dl_iterate_phdr lists them now, each module's rows
// found on demand in its loaded image (ModuleMap::load_in_memory): no file is opened and no
// table built, so this costs microseconds. Allocates and lists modules under the loader's lock:
// never from a signal handler (see unwind_impl.hpp).
// Set by ehelf_unw_preload: spaces are built with whole and compact tables.
bool g_whole_tables = false;

LocalSpace* build_local_space(LocalSpace* previous) {
  try {
    ModuleMap map = ModuleMap::for_self();
    if (previous) reuse_data(previous->map, map);
    map.load_in_memory(g_whole_tables);
    create_rules_key();
    // The DW_OP table is built on first use (it holds names): now, not in a handler's walk.
    (void)dw_op_name(0);
    auto* fresh = new LocalSpace(std::move(map));
    g_local.store(fresh, std::memory_order_release);
    return fresh; // the old space is deliberately leaked: see unwind_impl.hpp
  } catch (...) {
    return previous;
  }
}

// The current LocalSpace. It is built when the library is loaded (below), so walks, also the
// first of the process inside a signal handler, only read it; built here only if a walk comes
// before that (another library's constructor), under a lock.
LocalSpace* local_space() {
  if (LocalSpace* s = g_local.load(std::memory_order_acquire)) return s;
  std::lock_guard<std::mutex> lock(g_local_mutex);
  if (LocalSpace* s = g_local.load(std::memory_order_acquire)) return s;
  return build_local_space(nullptr);
}

// Rebuilds the space if a library was loaded or unloaded since it was built (unw_flush_cache).
LocalSpace* refresh_local_space() {
  std::lock_guard<std::mutex> lock(g_local_mutex);
  LocalSpace* s = g_local.load(std::memory_order_acquire);
  if (s && !s->map.stale_for_self()) return s;
  return build_local_space(s);
}

// At load: the space, and the loading thread's stack bounds (usually the main thread's, whose
// first walk then reads no /proc file).
// ehelf_unw_preload: a space whose modules have whole and compact tables (the modules of the
// current space do not, unless it was preloaded too: nothing is reused).
LocalSpace* preload_local_space() {
  std::lock_guard<std::mutex> lock(g_local_mutex);
  LocalSpace* s = g_local.load(std::memory_order_acquire);
  if (s && g_whole_tables && !s->map.stale_for_self()) return s;
  g_whole_tables = true;
  return build_local_space(nullptr);
}

__attribute__((constructor)) void build_local_space_at_load() {
  (void)local_space();
  (void)current_thread_stack();
}

// The ranges local unwinding reads directly: the thread's stack and the alternate signal stack.
void local_ranges(LocalMemory& mem) {
  mem.add(current_thread_stack());
  stack_t ss{};
  if (::sigaltstack(nullptr, &ss) == 0 && !(ss.ss_flags & SS_DISABLE) && ss.ss_sp) {
    uint64_t lo = reinterpret_cast<uint64_t>(ss.ss_sp);
    mem.add(AddressRange{lo, lo + ss.ss_size});
  }
}

// This process's memory: a plain copy inside the known stack ranges; elsewhere (a coroutine's
// stack, say) through process_vm_readv on ourselves, a system call that fails instead of
// faulting on unmapped memory.
class SelfMemory final : public MemoryReader {
public:
  bool read(uint64_t addr, void* out, size_t size) override {
    if (stacks.read(addr, out, size)) return true;
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(addr), size};
    return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
  }
  LocalMemory stacks;
};

SelfMemory local_memory(const Cursor& c) {
  SelfMemory mem;
  for (uint32_t i = 0; i < c.range_count; ++i)
    mem.stacks.add(c.ranges[i]);
  return mem;
}

// Reads through the accessors' access_mem, an aligned word at a time.
class AccessorMemory final : public MemoryReader {
public:
  AccessorMemory(unw_addr_space* as, void* arg) : as_(as), arg_(arg) {}
  bool read(uint64_t addr, void* out, size_t size) override {
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

private:
  unw_addr_space* as_;
  void* arg_;
};

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
    as->old_unwinders.push_back(std::move(as->unwinder));
  }
  as->map = std::move(map);
  as->unwinder = std::make_unique<Unwinder>(*as->map, remote_options(as->policy));
  as->pid = pid;
  as->maps_text = std::move(maps);
  return true;
}

// ---- locating a frame's module and FDE -----------------------------------------------------

struct Where {
  ModuleMap* map = nullptr;
  const Module* module = nullptr;
  const ModuleData* data = nullptr;
  uint64_t lookup = 0; // the address looked up: the pc, or pc - 1 for a return address
};

bool locate_in(ModuleMap& map, uint64_t lookup, MemoryReader* memory, Where& w) {
  w.map = &map;
  w.lookup = lookup;
  w.module = map.find(lookup);
  if (!w.module) return false;
  w.data = w.module->data.get();
  if (!w.data) {
    if (!memory) return false; // local: never load outside init
    w.data = &map.load(*w.module, LoadPolicy{}, memory);
  }
  return true;
}

std::optional<FunctionInfo> function_at(const Where& w) {
  if (!w.data) return std::nullopt;
  return w.data->function_at(w.lookup - w.module->bias);
}

// The frame's module, looked up at pc - 1 for a return address; but when no FDE covers pc - 1
// and one covers pc, at pc: a function "returned" to at its entry (makecontext makes
// __start_context the return address of a coroutine's first function), as Unwinder::step does.
bool locate(Cursor& c, Where& w) {
  if (!c.regs.has(x86_64::RIP)) return false;
  uint64_t pc = c.regs.get(x86_64::RIP);
  ModuleMap* map = c.remote ? c.as->map.get() : &c.local->map;
  if (!map) return false;
  AccessorMemory remote(c.as, c.arg);
  MemoryReader* memory = c.remote ? &remote : nullptr;
  bool found = locate_in(*map, c.exact ? pc : pc - 1, memory, w);
  if (c.exact || (found && function_at(w))) return found;
  Where at_pc;
  if (locate_in(*map, pc, memory, at_pc) && function_at(at_pc)) {
    w = at_pc;
    return true;
  }
  return found;
}

// `memory`: the process's memory (null: this process), for an indirect personality pointer.
void fill_proc_info(const Where& w, const FunctionInfo& fn, unw_proc_info_t* info,
                    MemoryReader* memory) {
  std::memset(info, 0, sizeof *info);
  uint64_t bias = w.module->bias;
  info->start_ip = fn.pc_begin + bias;
  info->end_ip = fn.pc_end + bias;
  info->lsda = fn.lsda ? fn.lsda + bias : 0;
  // The personality routine, as libunwind gives it: read from the process where the CIE points
  // to it indirectly (C++: DW.ref.__gxx_personality_v0, which the loader relocates; the file
  // holds 0 there), else the file's link-time address moved by the module's bias.
  uint64_t routine = fn.personality ? fn.personality + bias : 0;
  if (fn.personality_slot) {
    const uint64_t slot = fn.personality_slot + bias;
    const bool read =
        memory ? memory->read_u64(slot, routine) : read_own_memory(slot, &routine, sizeof routine);
    if (!read) routine = 0; // unknown, rather than the file's unrelocated value
  }
  info->handler = routine;
  info->flags = fn.from_debug_frame ? UNW_PI_FLAG_DEBUG_FRAME : 0;
  info->format = UNW_INFO_FORMAT_TABLE;
}

// The Symbolizer for names in `as`. The local one serves the whole process, whatever LocalSpace
// a cursor walks in (it is keyed by module data, which rebuilt spaces share), and is never freed
// (a thread may ask for a name while the process exits).
Symbolizer& symbolizer_of(unw_addr_space& as) {
  if (as.local) {
    static Symbolizer* local = new Symbolizer;
    return *local;
  }
  if (!as.names) as.names = std::make_unique<Symbolizer>();
  return *as.names;
}

// Copies the name of the symbol containing w.lookup (from a separate debug file too, as
// `ehelf stack` and eu-stack name it); `adjust` is added to the offset (1 when the lookup was
// pc - 1, so the offset is from the pc).
int name_at(unw_addr_space& as, const Where& w, uint64_t adjust, char* buf, size_t size,
            unw_word_t* offset) {
  SymbolName s = symbolizer_of(as).name(*w.map, *w.module, w.lookup);
  if (s.name.empty()) return -UNW_ENOINFO;
  if (offset) *offset = s.offset + adjust;
  if (!buf || size == 0) return -UNW_ENOMEM;
  size_t n = std::min(s.name.size(), size - 1);
  std::memcpy(buf, s.name.data(), n);
  buf[n] = '\0';
  return n < s.name.size() ? -UNW_ENOMEM : UNW_ESUCCESS;
}

int error_of(StopReason r) {
  switch (r) {
  case StopReason::None:
    return UNW_ESUCCESS;
  case StopReason::EndOfStack:
  case StopReason::NoModule:
    return UNW_ESUCCESS; // handled by the caller: the end
  case StopReason::NoTable:
    return UNW_ENOINFO;
  case StopReason::BadRead:
  case StopReason::CfaNotGrowing:
    return UNW_EBADFRAME;
  case StopReason::MissingRegister:
    return UNW_EBADREG;
  case StopReason::DepthLimit:
  case StopReason::RuleFailed:
    return UNW_EUNSPEC;
  }
  return UNW_EUNSPEC;
}

// Whether a caller's pc is in a known module; a pc in none (not code, or code loaded since the
// map was made) ends the walk there.
bool known_pc(const ModuleMap& map, uint64_t pc) {
  return map.find(pc - 1) || map.find(pc);
}

// One step of `c` into `regs`, without moving the cursor.
StopReason step_copy(Cursor& c, RegisterState& regs, FrameInfo& info) {
  if (!c.remote) {
    SelfMemory mem = local_memory(c);
    return c.local->unwinder.step(regs, mem, c.exact, info);
  }
  AccessorMemory mem(c.as, c.arg);
  Where w;
  locate(c, w); // loads the module's data through the accessors if needed
  return c.as->unwinder->step(regs, mem, c.exact, info);
}

// ---- unw_backtrace ------------------------------------------------------------------------

// The ranges unw_backtrace's walk reads: the thread's stack, and the alternate signal stack when
// the walk starts on it (a walk starting on the thread's stack never reaches it, and asking
// costs a system call).
void backtrace_ranges(uint64_t sp, LocalMemory& mem) {
  AddressRange stack = current_thread_stack();
  if (stack.contains(sp, 8))
    mem.add(stack);
  else
    local_ranges(mem);
}

bool in_ranges(const LocalMemory& mem, uint64_t sp) {
  for (const DirectRange& r : mem.ranges())
    if (sp >= r.begin && sp < r.end) return true;
  return false;
}

static_assert(sizeof(void*) == sizeof(uint64_t), "pcs are written to the void* buffer in place");

// The fast walk, with the thread's rule cache, straight into `buffer`. Returns the frame count,
// or -1 when step_walk should do it: the cache is in use (a signal handler interrupted a walk)
// or the walk stopped where a step may get further (memory outside the stack ranges, which
// step_walk reads with process_vm_readv; a return address with no FDE before it).
// `unknown_end`: the walk ended at a pc in no known module (left out of the list).
int direct_walk(LocalSpace& s, const RegisterState& regs, const LocalMemory& mem, void** buffer,
                int size, bool& unknown_end) {
  ThreadRules* rules = claim_rules(s);
  if (!rules) return -1;
  auto* pcs = reinterpret_cast<uint64_t*>(buffer); // the library is built -fno-strict-aliasing
  StopReason why = StopReason::None;
  size_t n = 0;
  try {
    n = s.fast.backtrace_direct(regs, mem, pcs, static_cast<size_t>(size), &why, false,
                                &rules->rules);
  } catch (...) { // only error paths allocate (their messages)
    why = StopReason::BadRead;
  }
  release_rules(*rules);
  if (why == StopReason::BadRead || why == StopReason::NoTable) return -1;
  // Every pc but the last was unwound, so is in a known module; the last ends the list when it
  // is in none, as in step_walk.
  unknown_end = why == StopReason::NoModule && n > 0 && !known_pc(s.map, pcs[n - 1]);
  return static_cast<int>(unknown_end ? n - 1 : n);
}

// The walk step by step (no rule cache), reading memory outside the stack ranges too.
int step_walk(LocalSpace& s, RegisterState regs, SelfMemory& mem, void** buffer, int size,
              bool& unknown_end) {
  FrameInfo info;
  bool exact = false; // the caller's pc is a return address
  int n = 0;
  try {
    while (n < size) {
      if (!known_pc(s.map, regs.get(x86_64::RIP))) {
        unknown_end = true;
        break;
      }
      buffer[n++] = reinterpret_cast<void*>(regs.get(x86_64::RIP));
      if (s.general.step(regs, mem, exact, info) != StopReason::None) break;
      exact = info.signal_frame;
    }
  } catch (...) { // only error paths allocate (their messages)
  }
  return n;
}

// unw_backtrace's list in space `s`: the fast walk where it can, else the step walk.
int backtrace_in(LocalSpace& s, const WalkStart& caller, void** buffer, int size,
                 bool& unknown_end) {
  RegisterState regs;
  regs.set(x86_64::RIP, caller.pc);
  regs.set(x86_64::RSP, caller.sp);
  regs.set(x86_64::RBP, caller.bp);
  regs.set(x86_64::RBX, caller.bx);
  SelfMemory mem;
  backtrace_ranges(caller.sp, mem.stacks);
  unknown_end = false;
  if (in_ranges(mem.stacks, caller.sp)) {
    int n = direct_walk(s, regs, mem.stacks, buffer, size, unknown_end);
    if (n >= 0) return n;
  }
  return step_walk(s, regs, mem, buffer, size, unknown_end);
}

} // namespace

constinit unw_addr_space g_local_space_object{.local = true};

LocalSpace::LocalSpace(ModuleMap m)
    : map(std::move(m)), unwinder(map, local_options(BackendKind::Interpreter)),
      fast(map, fast_options()), general(map, local_options(BackendKind::Auto)) {
  map.set_late_source(&late);
}

// ---- walking -------------------------------------------------------------------------------

int init_local(unw_cursor_t* cursor, const unw_context_t* context, bool exact) {
  if (!cursor || !context) return -UNW_EINVAL;
  LocalSpace* s = local_space();
  if (!s) return -UNW_ENOMEM;
  LocalMemory mem;
  local_ranges(mem);
  Cursor* c = new (cursor) Cursor{};
  c->as = &g_local_space_object;
  c->local = s;
  c->exact = exact;
  for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r)
    c->regs.set(r, static_cast<uint64_t>(context->uc_mcontext.gregs[kGregOfDwarf[r]]));
  for (const DirectRange& r : mem.ranges())
    c->ranges[c->range_count++] = AddressRange{r.begin, r.end};
  return UNW_ESUCCESS;
}

int init_remote(unw_cursor_t* cursor, unw_addr_space* as, void* arg) {
  if (!cursor || !as) return -UNW_EINVAL;
  if (as->local) return init_local(cursor, static_cast<const unw_context_t*>(arg), false);
  if (!as->accessors.access_reg || !as->accessors.access_mem) return -UNW_EINVAL;
  try {
    RegisterState regs;
    for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r) {
      unw_word_t v = 0;
      if (as->accessors.access_reg(as, static_cast<unw_regnum_t>(r), &v, 0, arg) == 0)
        regs.set(r, v);
    }
    if (!regs.has(x86_64::RIP) || !regs.has(x86_64::RSP)) return -UNW_EBADREG;
    pid_t pid = find_pid(as, arg, regs);
    if (pid <= 0 || !ensure_remote_map(as, pid)) return -UNW_EINVAL;
    Cursor* c = new (cursor) Cursor{};
    c->remote = true;
    c->exact = true; // a stopped thread's pc is the instruction it will run next
    c->as = as;
    c->arg = arg;
    c->regs = regs;
    return UNW_ESUCCESS;
  } catch (...) {
    return -UNW_ENOMEM;
  }
}

int step(Cursor& c) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  if (c.done) return 0;
  RegisterState regs = c.regs;
  FrameInfo info;
  StopReason r;
  try {
    r = step_copy(c, regs, info);
  } catch (...) { // only error paths allocate (their messages)
    return -UNW_EUNSPEC;
  }
  const ModuleMap& map = c.remote ? *c.as->map : c.local->map;
  if (r == StopReason::EndOfStack || r == StopReason::NoModule ||
      (r == StopReason::None && !known_pc(map, regs.get(x86_64::RIP)))) {
    c.done = true; // a caller in no known module is treated as the end of the stack
    return 0;
  }
  if (r != StopReason::None) return -error_of(r);
  c.regs = regs;
  c.exact = info.signal_frame; // after a signal frame the pc is the interrupted instruction
  return 1;
}

// Reads the space only: no staleness check (dl_iterate_phdr takes the loader's lock, which a
// profiler's handler may have interrupted), no allocation; a list ends at a pc in no module the
// space knows (see unwind_impl.hpp).
int backtrace_from(const WalkStart& caller, void** buffer, int size) {
  if (!buffer || size <= 0) return 0;
  LocalSpace* s = g_local.load(std::memory_order_acquire);
  if (!s && !(s = local_space())) return 0;
  bool unknown_end = false;
  return backtrace_in(*s, caller, buffer, size, unknown_end);
}

// ---- the current frame ---------------------------------------------------------------------

int get_reg(Cursor& c, int reg, unw_word_t* value) {
  if (c.magic != Cursor::kMagic || !value) return -UNW_EINVAL;
  if (reg >= 0 && reg < int(x86_64::kGeneralRegs)) {
    if (!c.regs.has(unsigned(reg))) return -UNW_EBADREG;
    *value = c.regs.get(unsigned(reg));
    return UNW_ESUCCESS;
  }
  if (reg == UNW_X86_64_CFA) { // the caller's stack pointer
    RegisterState regs = c.regs;
    FrameInfo info;
    StopReason r;
    try {
      r = step_copy(c, regs, info);
    } catch (...) {
      return -UNW_EUNSPEC;
    }
    if ((r != StopReason::None && r != StopReason::EndOfStack) || !regs.has(x86_64::RSP))
      return -UNW_EBADFRAME;
    *value = regs.get(x86_64::RSP);
    return UNW_ESUCCESS;
  }
  return -UNW_EBADREG;
}

int set_reg(Cursor& c, int reg, unw_word_t value) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  if (reg == UNW_X86_64_RSP || reg == UNW_X86_64_CFA) return -UNW_EREADONLYREG;
  if (reg < 0 || reg >= int(x86_64::kGeneralRegs)) return -UNW_EBADREG;
  c.regs.set(unsigned(reg), value);
  if (reg == UNW_X86_64_RIP) c.done = false;
  return UNW_ESUCCESS;
}

int get_save_loc(Cursor& c, int reg, unw_save_loc_t* loc) {
  if (c.magic != Cursor::kMagic || !loc) return -UNW_EINVAL;
  if (reg < 0 || reg > UNW_X86_64_CFA) return -UNW_EBADREG;
  std::memset(loc, 0, sizeof *loc);
  loc->type = UNW_SLT_NONE; // ehelf tracks values, not where they were saved
  return UNW_ESUCCESS;
}

// (Remote lookups may load a module's data, which allocates and may throw.)
int is_signal_frame(Cursor& c) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  try {
    Where w;
    if (!locate(c, w)) return 0;
    const std::optional<FunctionInfo> fn = function_at(w);
    return fn && fn->signal_frame ? 1 : 0;
  } catch (...) {
    return -UNW_EUNSPEC;
  }
}

namespace {
// unw_get_proc_info's answer for a located pc.
int proc_info_at(const Where& w, unw_proc_info_t* info, MemoryReader* memory) {
  const std::optional<FunctionInfo> fn = function_at(w);
  if (!fn) return -UNW_ENOINFO;
  fill_proc_info(w, *fn, info, memory);
  return UNW_ESUCCESS;
}
} // namespace

int get_proc_info(Cursor& c, unw_proc_info_t* info) {
  if (c.magic != Cursor::kMagic || !info) return -UNW_EINVAL;
  try {
    Where w;
    if (!locate(c, w)) return -UNW_ENOINFO;
    AccessorMemory remote(c.as, c.arg);
    return proc_info_at(w, info, c.remote ? &remote : nullptr);
  } catch (...) {
    return -UNW_EUNSPEC;
  }
}

int get_proc_name(Cursor& c, char* buf, size_t size, unw_word_t* offset) {
  if (c.magic != Cursor::kMagic) return -UNW_EINVAL;
  try {
    Where w;
    if (!locate(c, w)) {
      if (c.remote && c.as->accessors.get_proc_name && c.regs.has(x86_64::RIP))
        return c.as->accessors.get_proc_name(c.as, c.regs.get(x86_64::RIP), buf, size, offset,
                                             c.arg);
      return -UNW_ENOINFO;
    }
    return name_at(*c.as, w, c.regs.get(x86_64::RIP) - w.lookup, buf, size, offset);
  } catch (...) {
    return -UNW_EUNSPEC;
  }
}

namespace {
// The map of `as` for lookups by address: local, or the remote space's current one (built for
// the process behind `arg` if there is none yet).
ModuleMap* map_for(unw_addr_space* as, void* arg) {
  if (as->local) {
    LocalSpace* s = local_space();
    return s ? &s->map : nullptr;
  }
  pid_t pid = 0;
  if (upt_pid(as->accessors, arg, pid) && !ensure_remote_map(as, pid)) return nullptr;
  return as->map.get();
}
} // namespace

int proc_info_by_ip(unw_addr_space* as, unw_word_t ip, unw_proc_info_t* info, void* arg) {
  if (!as || !info) return -UNW_EINVAL;
  try {
    ModuleMap* map = map_for(as, arg);
    if (!map) return -UNW_ENOINFO;
    AccessorMemory mem(as, arg);
    Where w;
    if (!locate_in(*map, ip, as->local ? nullptr : &mem, w)) return -UNW_ENOINFO;
    return proc_info_at(w, info, as->local ? nullptr : &mem);
  } catch (...) {
    return -UNW_ENOMEM;
  }
}

int proc_name_by_ip(unw_addr_space* as, unw_word_t ip, char* buf, size_t size, unw_word_t* offset,
                    void* arg) {
  if (!as) return -UNW_EINVAL;
  try {
    ModuleMap* map = map_for(as, arg);
    if (!map) return -UNW_ENOINFO;
    AccessorMemory mem(as, arg);
    Where w;
    if (!locate_in(*map, ip, as->local ? nullptr : &mem, w)) return -UNW_ENOINFO;
    return name_at(*as, w, 0, buf, size, offset);
  } catch (...) {
    return -UNW_ENOMEM;
  }
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
  if (as->unwinder) as->unwinder->clear_cache();
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
  // The local space never caches rules (its walk is lock-free); a remote one caches unless NONE.
  if (as->local || as->policy == policy) {
    as->policy = policy;
    return UNW_ESUCCESS;
  }
  as->policy = policy;
  if (as->map) {
    try {
      as->old_unwinders.push_back(std::move(as->unwinder));
      as->unwinder = std::make_unique<Unwinder>(*as->map, remote_options(policy));
    } catch (...) {
      return -UNW_ENOMEM;
    }
  }
  return UNW_ESUCCESS;
}

// ---- names ---------------------------------------------------------------------------------

const char* error_text(int error) {
  switch (error < 0 ? -error : error) {
  case UNW_ESUCCESS:
    return "no error";
  case UNW_EUNSPEC:
    return "unspecified (general) error";
  case UNW_ENOMEM:
    return "out of memory";
  case UNW_EBADREG:
    return "bad register number";
  case UNW_EREADONLYREG:
    return "attempt to write read-only register";
  case UNW_ESTOPUNWIND:
    return "stop unwinding";
  case UNW_EINVALIDIP:
    return "invalid IP";
  case UNW_EBADFRAME:
    return "bad frame";
  case UNW_EINVAL:
    return "unsupported operation or bad value";
  case UNW_EBADVERSION:
    return "unwind info has unsupported version";
  case UNW_ENOINFO:
    return "no unwind info found";
  default:
    return "invalid error code";
  }
}

const char* register_name(int reg) {
  static const char* const names[] = {"RAX", "RDX", "RCX", "RBX", "RSI", "RDI",
                                      "RBP", "RSP", "R8",  "R9",  "R10", "R11",
                                      "R12", "R13", "R14", "R15", "RIP", "CFA"};
  if (reg < 0 || reg > UNW_X86_64_CFA) return "???";
  return names[reg];
}

} // namespace ehelf::capi
