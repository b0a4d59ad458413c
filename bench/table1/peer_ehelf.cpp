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

// What both kinds of ehelf peer share: the module data, one ModuleMap and Unwinder per process.
class EhelfPeer : public Peer {
public:
  EhelfPeer(const char* name, BackendKind backend) : name_(name), backend_(backend) {
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
    unwinders_.resize(contexts_.size());
    unwinders_[maps.index] = ctx->unwinder.get();
  }

  std::string note() const override {
    std::string s;
    for (const auto& [path, yes] : without_eh_elf_)
      s += (s.empty() ? "no eh_elf in $EHELF_CACHE for (the table unwound them): " : ", ") + path;
    return s;
  }

protected:
  Unwinder& unwinder_of(const Sample& s) { return *unwinders_[s.maps->index]; }

private:
  struct Context {
    ModuleMap map;
    std::unique_ptr<Unwinder> unwinder;
  };
  const char* name_;
  BackendKind backend_;
  LoadPolicy policy_;
  std::vector<std::unique_ptr<Context>> contexts_; // by Maps::index (a ModuleMap must not move)
  std::vector<Unwinder*> unwinders_;               // contexts_' unwinders, one load away
  std::map<const ModuleFile*, std::shared_ptr<const ModuleData>> data_;
  std::map<std::string, bool> without_eh_elf_;
};

// The fast walk, as ehelf perf calls it: every recorded register and the stack copy as is.
class FastWalkPeer final : public EhelfPeer {
public:
  FastWalkPeer() : EhelfPeer("ehelf fast walk", BackendKind::Auto) {}
  size_t unwind(const Sample& s, uint64_t* pcs, size_t max, Stop& stop) override {
    StopReason why = StopReason::None;
    const size_t n =
        unwinder_of(s).backtrace_sample(s.regs, s.stack, pcs, max, &why, FrameAddress::Exact);
    stop.end_of_stack = why == StopReason::EndOfStack;
    stop.why = why;
    return n;
  }
};

// The general walk (every register, one frame at a time) with one backend.
class GeneralWalkPeer final : public EhelfPeer {
public:
  using EhelfPeer::EhelfPeer;
  size_t unwind(const Sample& s, uint64_t* pcs, size_t max, Stop& stop) override {
    LocalMemory memory;
    memory.add(AddressRange{s.sp(), s.sp() + s.stack.size()},
               static_cast<int64_t>(reinterpret_cast<uint64_t>(s.stack.data()) - s.sp()));
    if (frames_.size() < max) frames_.resize(max);
    StopReason why = StopReason::None;
    const size_t n =
        unwinder_of(s).backtrace(s.regs, memory, frames_.data(), max, &why, FrameAddress::Exact);
    for (size_t i = 0; i < n; ++i)
      pcs[i] = frames_[i].pc;
    stop.end_of_stack = why == StopReason::EndOfStack;
    stop.why = why;
    return n;
  }

private:
  std::vector<FrameInfo> frames_;
};

} // namespace

void add_ehelf_peers(std::vector<std::unique_ptr<Peer>>& peers) {
  peers.push_back(std::make_unique<FastWalkPeer>());
  peers.push_back(
      std::make_unique<GeneralWalkPeer>("ehelf general, compiled", BackendKind::Compiled));
  peers.push_back(std::make_unique<GeneralWalkPeer>("ehelf general, table", BackendKind::Table));
  peers.push_back(
      std::make_unique<GeneralWalkPeer>("ehelf general, interp", BackendKind::Interpreter));
}

} // namespace table1
