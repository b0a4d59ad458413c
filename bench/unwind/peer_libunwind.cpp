// libunwind (libunwind-dev, the nongnu project), local-only API: unw_backtrace (its fast trace
// path with a per-thread frame cache) and the plain unw_step loop.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "peer.hpp"
#include "unw_step_loop.hpp"

namespace bench {
namespace {

std::string init() { return ""; }

} // namespace

void add_libunwind_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = "libunwind unw_backtrace";
  p.cold_means = "unw_flush_cache(); its per-thread trace cache has no flush API, so only the "
                 "sample's new call sites miss in it";
  p.init = init;
  p.flush = unw_flush_local;
  p.once = unw_backtrace_once;
  peers.push_back(p);
  p.name = "libunwind unw_step loop";
  p.cold_means = "unw_flush_cache() before each unwind";
  p.once = unw_step_loop;
  peers.push_back(p);
}

} // namespace bench
