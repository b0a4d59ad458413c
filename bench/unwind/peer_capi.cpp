// ehelf's C library (libehelf-unwind, from the main build): the same two walks as libunwind's
// peers, through the same API (it defines the same unw_* names as libunwind-dev, so it lives in
// its own binary, unwind_bench_capi): unw_backtrace and the plain unw_step loop.
#include <libunwind.h>

#include "peer.hpp"
#include "unw_step_loop.hpp"

namespace bench {
namespace {

std::string init() {
  return "";
}

} // namespace

void add_capi_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = "ehelf C API unw_backtrace";
  p.cold_means = "unw_flush_cache() (the space rebuilt: the thread's rule cache starts empty)";
  p.init = init;
  p.flush = unw_flush_local;
  p.once = unw_backtrace_once;
  peers.push_back(p);
  p.name = "ehelf C API unw_step loop";
  p.cold_means = "unw_flush_cache() (the space rebuilt: the thread's remembered rows start empty)";
  p.once = unw_step_loop;
  peers.push_back(p);
}

} // namespace bench
