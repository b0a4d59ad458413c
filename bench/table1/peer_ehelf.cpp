// ehelf over a sample's stack copy (a LocalMemory range with a delta, as ehelf perf reads it):
// the fast walk (Unwinder::backtrace_sample, ehelf perf's) and the general walk
// (Unwinder::backtrace) with each backend. One ModuleMap and Unwinder per process version, as
// ehelf perf keeps one per process; module data loaded once per file.
#include <map>

#include "peer.hpp"
#include "runtime/unwinder.hpp"

namespace table1 {
namespace {

using namespace ehelf;

class EhelfPeer final : public Peer {
public:
  EhelfPeer(const char* name, BackendKind backend, bool fast)
      : name_(name), backend_(backend), fast_(fast) {
    policy_.compiled = backend == BackendKind::Compiled;
  }
  const char* name() const override { return name_; }

  void prepare(const Maps& maps) override {
    if (contexts_.size() <= maps.index) contexts_.resize(maps.index + 1);
    std::unique_ptr<Context>& ctx = contexts_[maps.index];
    if (ctx) return;
    ctx = std::make_unique<Context>();
    for (const ModuleRef& ref : maps.modules) {
      auto& data = data_[ref.file];
      if (!data) {
        data = load_module(ref.file->path, policy_);
        if (policy_.compiled && !data->compiled) without_eh_elf_[ref.file->path] = true;
      }
      Module m;
      m.path = ref.file->path;
      m.start = ref.start;
      m.end = ref.end;
      m.bias = ref.bias;
      m.data = data;
      ctx->map.add(std::move(m));
    }
    ctx->map.finish();
    UnwinderOptions o;
    o.backend = backend_;
    o.max_depth = 1 << 20; // the caller's max
    o.allow_loading = false;
    ctx->unwinder = std::make_unique<Unwinder>(ctx->map, o);
  }

  size_t unwind(const Sample& s, uint64_t* pcs, size_t max, Stop& stop) override {
    Unwinder& unwinder = *contexts_[s.maps->index]->unwinder;
    // Every recorded register, as ehelf perf gives them (the first frame's rule may read any).
    StopReason why = StopReason::None;
    size_t n;
    if (fast_) {
      n = unwinder.backtrace_sample(s.regs, s.stack, pcs, max, &why, true);
    } else {
      LocalMemory memory;
      memory.add(AddressRange{s.sp(), s.sp() + s.stack.size()},
                 static_cast<int64_t>(reinterpret_cast<uint64_t>(s.stack.data()) - s.sp()));
      if (frames_.size() < max) frames_.resize(max);
      n = unwinder.backtrace(s.regs, memory, frames_.data(), max, &why, true);
      for (size_t i = 0; i < n; ++i)
        pcs[i] = frames_[i].pc;
    }
    stop.end_of_stack = why == StopReason::EndOfStack;
    stop.why = why;
    return n;
  }

  std::string note() const override {
    std::string s;
    for (const auto& [path, yes] : without_eh_elf_)
      s += (s.empty() ? "no eh_elf in $EHELF_CACHE for (the table unwound them): " : ", ") + path;
    return s;
  }

private:
  struct Context {
    ModuleMap map;
    std::unique_ptr<Unwinder> unwinder;
  };
  const char* name_;
  BackendKind backend_;
  bool fast_;
  LoadPolicy policy_;
  std::vector<std::unique_ptr<Context>> contexts_; // by Maps::index (a ModuleMap must not move)
  std::map<const ModuleFile*, std::shared_ptr<const ModuleData>> data_;
  std::map<std::string, bool> without_eh_elf_;
  std::vector<FrameInfo> frames_;
};

} // namespace

void add_ehelf_peers(std::vector<std::unique_ptr<Peer>>& peers) {
  peers.push_back(std::make_unique<EhelfPeer>("ehelf fast walk", BackendKind::Auto, true));
  peers.push_back(
      std::make_unique<EhelfPeer>("ehelf general, compiled", BackendKind::Compiled, false));
  peers.push_back(std::make_unique<EhelfPeer>("ehelf general, table", BackendKind::Table, false));
  peers.push_back(
      std::make_unique<EhelfPeer>("ehelf general, interp", BackendKind::Interpreter, false));
}

} // namespace table1
