// libunwind (libunwind-dev, the nongnu project), local-only API: unw_backtrace (its fast trace
// path with a per-thread frame cache) and the plain unw_step loop.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "peer.hpp"
#include "unw_step_loop.hpp"

namespace bench {
namespace {

__attribute__((noinline)) size_t backtrace_once(uint64_t* pcs, size_t max, bool) {
  int n = unw_backtrace(reinterpret_cast<void**>(pcs), int(max));
  asm volatile("" ::: "memory");
  return n < 0 ? 0 : size_t(n);
}

void flush() { unw_flush_cache(unw_local_addr_space, 0, 0); }

std::string init() { return ""; }

} // namespace

void add_libunwind_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = "libunwind unw_backtrace";
  p.cold_means = "unw_flush_cache(); its per-thread trace cache has no flush API, so only the "
                 "sample's new call sites miss in it";
  p.init = init;
  p.flush = flush;
  p.once = backtrace_once;
  peers.push_back(p);
  p.name = "libunwind unw_step loop";
  p.cold_means = "unw_flush_cache() before each unwind";
  p.once = unw_step_loop;
  peers.push_back(p);
}

} // namespace bench
