// libunwind (nongnu, libunwind-dev) remote over a sample's stack copy, as perf's
// util/unwind-libunwind-local.c drives it: one address space per process version (caching
// UNW_CACHE_GLOBAL, perf's choice, or UNW_CACHE_NONE), find_proc_info through the module's
// .eh_frame_hdr search table (dwarf_search_unwind_table over a UNW_INFO_FORMAT_REMOTE_TABLE),
// memory from the stack copy or else from the module files, registers from the sample.
#include <libunwind.h>

#include <cstring>
#include <deque>
#include <map>

#include "peer.hpp"

// libunwind's search of a remote .eh_frame_hdr table: exported, not declared in its headers
// (perf declares it the same way).
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                                  unw_dyn_info_t* di, unw_proc_info_t* pi,
                                                  int need_unwind_info, void* arg);

namespace table1 {
namespace {

// The .eh_frame_hdr of a module file: its search table's place (SVMA) and length.
struct HdrTable {
  bool ok = false;
  uint64_t hdr_svma = 0, fde_count = 0;
};

HdrTable hdr_table(const ModuleFile& f) {
  HdrTable t;
  const ehelf::Section* s = f.elf->find_section(".eh_frame_hdr");
  if (!s) return t;
  uint8_t h[12];
  if (!f.read(s->addr, h, sizeof h)) return t;
  // version 1, fde_count udata4, table datarel|sdata4: the layout every linker writes.
  if (h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b) return t;
  uint32_t count;
  std::memcpy(&count, h + 8, 4);
  t.ok = true;
  t.hdr_svma = s->addr;
  t.fde_count = count;
  return t;
}

struct Context {
  const Maps* maps = nullptr;
  const Sample* sample = nullptr;
  std::map<const ModuleFile*, HdrTable>* tables = nullptr;
  unw_addr_space_t as = nullptr;
};

int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info,
                   void* arg) {
  auto* ctx = static_cast<Context*>(arg);
  const ModuleRef* m = ctx->maps->find(ip);
  if (!m) return -UNW_ENOINFO;
  auto it = ctx->tables->find(m->file);
  if (it == ctx->tables->end()) it = ctx->tables->emplace(m->file, hdr_table(*m->file)).first;
  const HdrTable& t = it->second;
  if (!t.ok) return -UNW_ENOINFO;
  unw_dyn_info_t di{};
  di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
  di.start_ip = m->start;
  di.end_ip = m->end;
  di.u.rti.segbase = m->bias + t.hdr_svma;
  di.u.rti.table_data = m->bias + t.hdr_svma + 12;
  di.u.rti.table_len = t.fde_count * 8 / sizeof(unw_word_t);
  return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

void put_unwind_info(unw_addr_space_t, unw_proc_info_t*, void*) {}

int get_dyn_info_list_addr(unw_addr_space_t, unw_word_t*, void*) {
  return -UNW_ENOINFO;
}

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* valp, int write, void* arg) {
  auto* ctx = static_cast<Context*>(arg);
  if (write) return -UNW_EINVAL;
  if (ctx->sample->read_stack(addr, valp, sizeof *valp)) return 0;
  if (ctx->maps->read_file(addr, valp, sizeof *valp)) return 0;
  *valp = 0;
  return -UNW_EINVAL;
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* valp, int write, void* arg) {
  auto* ctx = static_cast<Context*>(arg);
  if (write || reg < 0 || reg > 16 || !ctx->sample->regs.has(unsigned(reg))) return -UNW_EBADREG;
  *valp = ctx->sample->regs.get(unsigned(reg)); // UNW_X86_64_* numbers are the DWARF ones
  return 0;
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
  return -UNW_EINVAL;
}

int resume(unw_addr_space_t, unw_cursor_t*, void*) {
  return -UNW_EINVAL;
}

int get_proc_name(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) {
  return -UNW_EINVAL;
}

unw_accessors_t kAccessors = {find_proc_info, put_unwind_info, get_dyn_info_list_addr,
                              access_mem,     access_reg,      access_fpreg,
                              resume,         get_proc_name};

const char* error_name(int rc) {
  switch (-rc) {
  case UNW_EUNSPEC:
    return "UNW_EUNSPEC (unspecified)";
  case UNW_ENOMEM:
    return "UNW_ENOMEM";
  case UNW_EBADREG:
    return "UNW_EBADREG (bad register)";
  case UNW_EREADONLYREG:
    return "UNW_EREADONLYREG";
  case UNW_ESTOPUNWIND:
    return "UNW_ESTOPUNWIND";
  case UNW_EINVALIDIP:
    return "UNW_EINVALIDIP (invalid ip)";
  case UNW_EBADFRAME:
    return "UNW_EBADFRAME (bad frame)";
  case UNW_EINVAL:
    return "UNW_EINVAL (memory read refused)";
  case UNW_EBADVERSION:
    return "UNW_EBADVERSION";
  case UNW_ENOINFO:
    return "UNW_ENOINFO (no unwind info)";
  default:
    return "other libunwind error";
  }
}

class LibunwindPeer final : public Peer {
public:
  LibunwindPeer(const char* name, unw_caching_policy_t policy) : name_(name), policy_(policy) {}
  ~LibunwindPeer() override {
    for (Context& ctx : contexts_)
      if (ctx.as) unw_destroy_addr_space(ctx.as);
  }
  const char* name() const override { return name_; }

  void prepare(const Maps& maps) override {
    if (contexts_.size() <= maps.index) contexts_.resize(maps.index + 1);
    Context& ctx = contexts_[maps.index];
    if (ctx.as) return;
    ctx.maps = &maps;
    ctx.tables = &tables_;
    ctx.as = unw_create_addr_space(&kAccessors, 0);
    unw_set_caching_policy(ctx.as, policy_);
  }

  size_t unwind(const Sample& s, uint64_t* pcs, size_t max, Stop& stop) override {
    Context& ctx = contexts_[s.maps->index];
    ctx.sample = &s;
    unw_cursor_t cursor;
    int rc = unw_init_remote(&cursor, ctx.as, &ctx);
    if (rc < 0) {
      stop.reason = error_name(rc);
      return 0;
    }
    size_t n = 0;
    do {
      unw_word_t ip = 0;
      unw_get_reg(&cursor, UNW_REG_IP, &ip);
      pcs[n++] = ip;
      if (n == max) {
        stop.reason = kDepthLimit;
        return n;
      }
      rc = unw_step(&cursor);
    } while (rc > 0);
    stop.end_of_stack = rc == 0;
    stop.reason = rc == 0 ? "end of stack (unw_step 0)" : error_name(rc);
    return n;
  }

private:
  const char* name_;
  unw_caching_policy_t policy_;
  std::deque<Context> contexts_; // by Maps::index (the address spaces point to them)
  std::map<const ModuleFile*, HdrTable> tables_;
};

} // namespace

void add_libunwind_peers(std::vector<std::unique_ptr<Peer>>& peers) {
  peers.push_back(std::make_unique<LibunwindPeer>("libunwind remote, cached", UNW_CACHE_GLOBAL));
  peers.push_back(
      std::make_unique<LibunwindPeer>("libunwind remote, UNW_CACHE_NONE", UNW_CACHE_NONE));
}

} // namespace table1
