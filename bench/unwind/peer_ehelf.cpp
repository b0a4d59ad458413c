// Our in-process unwinder in each backend configuration. One ModuleMap (load_all() up front, as a
// profiler would), one Unwinder per configuration with its own rule cache.
#include <cstdlib>
#include <memory>
#include <string>

#include "peer.hpp"
#include "runtime/local.hpp"
#include "runtime/unwinder.hpp"

namespace bench {
namespace {

using namespace ehelf;

ModuleMap* g_map;
LocalMemory* g_mem;
constexpr size_t kMax = 1024;
FrameInfo g_frames[kMax];

struct Config {
  BackendKind backend;
  Unwinder* unwinder = nullptr;
};
Config g_configs[5] = {{BackendKind::Table},
                       {BackendKind::Interpreter},
                       {BackendKind::Compiled},
                       {BackendKind::Auto},
                       {BackendKind::Auto}};
AddressRange g_stack_range;

std::string common_init() {
  if (g_map) return "";
  g_map = new ModuleMap(ModuleMap::for_self());
  g_map->load_all();
  g_mem = new LocalMemory(current_thread_stack());
  g_stack_range = current_thread_stack();
  for (auto& c : g_configs) {
    UnwinderOptions o;
    o.backend = c.backend;
    c.unwinder = new Unwinder(*g_map, o);
  }
  return "";
}

// Which modules have a compiled eh_elf (the compiled and auto configurations need one for the
// executable and libc, the modules of the chain).
std::string compiled_note() {
  std::string have, missing;
  for (const auto& m : g_map->modules()) {
    bool chain = m.path.find("libc.so") != std::string::npos ||
                 m.path.find("unwind_bench") != std::string::npos;
    if (!chain) continue;
    std::string base = m.path.substr(m.path.rfind('/') + 1);
    ((m.data && m.data->compiled) ? have : missing) += (base + " ");
  }
  if (missing.empty()) return "";
  return "no eh_elf in $EHELF_CACHE for: " + missing + "(those modules fall back to the table)";
}

template <int I> std::string init() {
  std::string err = common_init();
  if (!err.empty()) return err;
  if (g_configs[I].backend == BackendKind::Compiled) {
    std::string note = compiled_note();
    if (!note.empty()) return note; // a "compiled" row that is really the table would mislead
  }
  return "";
}

template <int I> void flush() {
  g_configs[I].unwinder->clear_cache();
}

template <int I> __attribute__((noinline)) size_t once(uint64_t* pcs, size_t max, bool record) {
  RegisterState regs = capture_local();
  StopReason why;
  if (max > kMax) max = kMax;
  size_t n = g_configs[I].unwinder->backtrace(regs, *g_mem, g_frames, max, &why,
                                              FrameAddress::ReturnAddress);
  if (record)
    for (size_t i = 0; i < n; ++i)
      pcs[i] = g_frames[i].pc;
  asm volatile("" ::: "memory");
  return n;
}

// The pcs-only hot path (Unwinder::backtrace_local), the counterpart of unw_backtrace.
template <int I> __attribute__((noinline)) size_t once_pcs(uint64_t* pcs, size_t max, bool) {
  WalkStart regs = capture_walk_start();
  StopReason why;
  static uint64_t scratch[kMax];
  if (max > kMax) max = kMax;
  size_t n = g_configs[I].unwinder->backtrace_local(regs, g_stack_range, pcs ? pcs : scratch, max,
                                                    &why, FrameAddress::ReturnAddress);
  asm volatile("" ::: "memory");
  return n;
}

template <int I> Peer make(const char* name) {
  Peer p;
  p.name = name;
  p.cold_means = "Unwinder::clear_cache() (rule cache dropped; module tables stay loaded)";
  p.init = init<I>;
  p.flush = flush<I>;
  p.once = once<I>;
  return p;
}

} // namespace

void add_ehelf_peers(std::vector<Peer>& peers) {
  peers.push_back(make<0>("ehelf table"));
  peers.back().cold_means = "Unwinder::clear_cache() (rule cache dropped; compact tables stay "
                            "loaded)";
  peers.push_back(make<1>("ehelf interp"));
  peers.back().cold_means = "no rule cache in this backend (module tables stay loaded)";
  peers.back().flush = nullptr;
  peers.push_back(make<2>("ehelf compiled"));
  peers.back().cold_means = "no rule cache in this backend (eh_elfs stay loaded)";
  peers.back().flush = nullptr;
  peers.push_back(make<3>("ehelf auto"));
  peers.push_back(make<4>("ehelf backtrace_local"));
  peers.back().once = once_pcs<4>;
  peers.back().cold_means =
      "Unwinder::clear_cache() (rule cache dropped; module tables stay loaded, "
      "and so does the memo of the last two modules filled from, as the "
      "module map's index of its last two hits does)";
}

} // namespace bench
