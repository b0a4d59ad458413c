#include "capi/proc_info.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "runtime/memory.hpp"

namespace ehelf::capi {

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

namespace {
std::optional<FunctionInfo> function_at(const Where& w) {
  if (!w.data) return std::nullopt;
  return w.data->function_at(w.lookup - w.module->bias);
}
// The FDE at `pc` itself, for a return address with none before it.
bool locate_at_entry(ModuleMap& map, uint64_t pc, MemoryReader* memory, Where& w) {
  Where at_pc;
  if (!locate_in(map, pc, memory, at_pc) || !function_at(at_pc)) return false;
  w = at_pc;
  return true;
}
} // namespace

bool is_function_entry(ModuleMap& map, uint64_t pc) {
  Where w;
  if (!locate_in(map, pc, nullptr, w)) return false;
  const std::optional<FunctionInfo> fn = function_at(w);
  return fn && fn->pc_begin + w.module->bias == pc;
}

bool locate(Cursor& c, Where& w) {
  if (!c.regs.has(x86_64::RIP)) return false;
  uint64_t pc = c.regs.get(x86_64::RIP);
  ModuleMap* map = c.remote ? c.as->map.get() : &c.local->map;
  if (!map) return false;
  AccessorMemory remote(c.as, c.arg);
  MemoryReader* memory = c.remote ? &remote : nullptr;
  bool found = locate_in(*map, c.exact ? pc : pc - 1, memory, w);
  if (c.exact) return found;
  if (found) {
    const std::optional<FunctionInfo> fn = function_at(w);
    if (!fn) return locate_at_entry(*map, pc, memory, w) || found;
    Where at_pc;
    if (fn->signal_frame && locate_in(*map, pc, memory, at_pc)) {
      const std::optional<FunctionInfo> same = function_at(at_pc);
      if (same && same->pc_begin == fn->pc_begin) w = at_pc;
    }
    return true;
  }
  return locate_at_entry(*map, pc, memory, w);
}

namespace {

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

// A symbol's name without its version: a shared library's .symtab (libc's debug file) spells
// versioned definitions "__libc_start_main@@GLIBC_2.34", while libunwind and glibc's dladdr
// name them "__libc_start_main", and programs compare these names. Mangled C++ names never
// hold '@'.
std::string_view unversioned(std::string_view name) {
  return name.substr(0, name.find('@'));
}

// Copies the name of the symbol containing w.lookup (from a separate debug file too, as
// `ehelf stack` and eu-stack name it); `adjust` is added to the offset (1 when the lookup was
// pc - 1, so the offset is from the pc).
int name_at(unw_addr_space& as, const Where& w, uint64_t adjust, char* buf, size_t size,
            unw_word_t* offset) {
  SymbolName s = symbolizer_of(as).name(*w.map, *w.module, w.lookup);
  s.name = unversioned(s.name);
  if (s.name.empty()) return -UNW_ENOINFO;
  if (offset) *offset = s.offset + adjust;
  if (!buf || size == 0) return -UNW_ENOMEM;
  size_t n = std::min(s.name.size(), size - 1);
  std::memcpy(buf, s.name.data(), n);
  buf[n] = '\0';
  return n < s.name.size() ? -UNW_ENOMEM : UNW_ESUCCESS;
}

// unw_get_proc_info's answer for a located pc.
int proc_info_at(const Where& w, unw_proc_info_t* info, MemoryReader* memory) {
  const std::optional<FunctionInfo> fn = function_at(w);
  if (!fn) return -UNW_ENOINFO;
  fill_proc_info(w, *fn, info, memory);
  return UNW_ESUCCESS;
}

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

int get_proc_info(Cursor& c, unw_proc_info_t* info) {
  if (c.magic != Cursor::kMagic || !info) return -UNW_EINVAL;
  try {
    Where w;
    if (!locate(c, w)) return -UNW_ENOINFO;
    const std::optional<FunctionInfo> fn = function_at(w);
    if (!fn) return -UNW_ENOINFO;
    AccessorMemory remote(c.as, c.arg);
    fill_proc_info(w, *fn, info, c.remote ? &remote : nullptr);
    c.last_entry_signal = fn->signal_frame; // the entry looked up last now (is_signal_frame)
    return UNW_ESUCCESS;
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
// `answer(where, memory)` for the frame at `ip` in `as` (memory: null for the local space);
// ENOINFO when no module holds it.
template <typename Answer>
int answer_by_ip(unw_addr_space* as, unw_word_t ip, void* arg, Answer&& answer) {
  try {
    ModuleMap* map = map_for(as, arg);
    if (!map) return -UNW_ENOINFO;
    AccessorMemory mem(as, arg);
    MemoryReader* memory = as->local ? nullptr : &mem;
    Where w;
    if (!locate_in(*map, ip, memory, w)) return -UNW_ENOINFO;
    return answer(w, memory);
  } catch (...) {
    return -UNW_ENOMEM;
  }
}
} // namespace

int proc_info_by_ip(unw_addr_space* as, unw_word_t ip, unw_proc_info_t* info, void* arg) {
  if (!as || !info) return -UNW_EINVAL;
  return answer_by_ip(as, ip, arg, [info](const Where& w, MemoryReader* memory) {
    return proc_info_at(w, info, memory);
  });
}

int proc_name_by_ip(unw_addr_space* as, unw_word_t ip, char* buf, size_t size, unw_word_t* offset,
                    void* arg) {
  if (!as) return -UNW_EINVAL;
  return answer_by_ip(as, ip, arg, [&](const Where& w, MemoryReader*) {
    return name_at(*as, w, 0, buf, size, offset);
  });
}

} // namespace ehelf::capi
