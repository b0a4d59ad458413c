// elfutils libdwfl with sample callbacks, as perf's util/unwind-libdw.c: modules reported from
// the files (dwfl_report_elf), thread state from the sample (registers; memory from the stack
// copy, else from the module files), frames from dwfl_getthread_frames. perf begins a Dwfl per
// sample; here one Dwfl per process version is kept (modules reported and state attached once),
// so libdwfl's per-module CFI caches stay warm across samples: its best case.
#include <elfutils/libdwfl.h>

#include <memory>
#include <set>
#include <string>

#include "dwfl_frames.hpp"
#include "peer.hpp"

namespace table1 {
namespace {

struct Context {
  Dwfl* dwfl = nullptr;
  const Maps* maps = nullptr;
  const Sample* sample = nullptr;
};

pid_t next_thread(Dwfl*, void* arg, void** thread_argp) {
  if (*thread_argp) return 0;
  *thread_argp = arg;
  return static_cast<pid_t>(static_cast<Context*>(arg)->sample->tid);
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  auto* ctx = static_cast<Context*>(arg);
  return ctx->sample->read_stack(addr, result, sizeof *result) ||
         ctx->maps->read_file(addr, result, sizeof *result);
}

bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
  const Sample& s = *static_cast<Context*>(arg)->sample;
  // dwfl_thread_state_registers takes consecutive DWARF registers: the known ones, one by one.
  for (unsigned r = 0; r < 17; ++r) {
    if (!s.regs.has(r)) continue;
    Dwarf_Word v = s.regs.get(r);
    if (!dwfl_thread_state_registers(thread, int(r), 1, &v)) return false;
  }
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    next_thread, nullptr, memory_read, set_initial_registers, nullptr, nullptr,
};

char* g_debuginfo_path;
const Dwfl_Callbacks kCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_standard_find_debuginfo,
    dwfl_offline_section_address,
    &g_debuginfo_path,
};

class DwflPeer final : public Peer {
public:
  ~DwflPeer() override {
    for (auto& ctx : contexts_)
      if (ctx && ctx->dwfl) dwfl_end(ctx->dwfl);
  }
  const char* name() const override { return "elfutils libdwfl"; }

  void prepare(const Maps& maps) override {
    if (contexts_.size() <= maps.index) contexts_.resize(maps.index + 1);
    auto& ctx = contexts_[maps.index];
    if (ctx) return;
    ctx = std::make_unique<Context>();
    ctx->maps = &maps;
    ctx->dwfl = dwfl_begin(&kCallbacks);
    dwfl_report_begin(ctx->dwfl);
    for (const ModuleRef& m : maps.modules) {
      // add_p_vaddr: the module's bias is `base` (AVMA - SVMA).
      if (!dwfl_report_elf(ctx->dwfl, m.file->path.c_str(), m.file->path.c_str(), -1, m.bias, true))
        failed_reports_++;
    }
    dwfl_report_end(ctx->dwfl, nullptr, nullptr);
    // One attach per Dwfl: the sample whose stack is walked is the context's current one.
    ctx->sample = nullptr;
    attached_ = dwfl_attach_state(ctx->dwfl, nullptr, 1, &kThreadCallbacks, ctx.get());
  }

  size_t unwind(const Sample& s, uint64_t* pcs, size_t max, Stop& stop) override {
    Context& ctx = *contexts_[s.maps->index];
    ctx.sample = &s;
    bench::DwflWalk w{pcs, 0, max};
    int rc = dwfl_getthread_frames(ctx.dwfl, pid_t(s.tid), bench::dwfl_collect_pc, &w);
    if (w.n == max) {
      stop.reason = kDepthLimit;
    } else {
      stop.end_of_stack = rc == 0;
      stop.reason = rc == 0 ? "end of stack" : intern(dwfl_errmsg(-1));
    }
    return w.n;
  }

  std::string note() const override {
    std::string s;
    if (failed_reports_) s = std::to_string(failed_reports_) + " modules not reported";
    if (!attached_) s += (s.empty() ? "" : "; ") + std::string("dwfl_attach_state failed");
    return s;
  }

private:
  // libdwfl's message may live in a buffer it reuses: kept here for the report.
  const char* intern(const char* message) { return messages_.insert(message).first->c_str(); }

  std::vector<std::unique_ptr<Context>> contexts_; // by Maps::index
  std::set<std::string> messages_;
  size_t failed_reports_ = 0;
  bool attached_ = true;
};

} // namespace

void add_dwfl_peers(std::vector<std::unique_ptr<Peer>>& peers) {
  peers.push_back(std::make_unique<DwflPeer>());
}

} // namespace table1
