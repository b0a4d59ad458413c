// LLVM's libunwind (static libunwind.a from the libunwind-14-dev .deb, which conflicts with
// libunwind-dev and so lives in its own binary): the unw_step loop of its unw_* API.
#include <libunwind.h>

#include "peer.hpp"
#include "unw_step_loop.hpp"

namespace bench {
namespace {

std::string init() { return ""; }

} // namespace

void add_llvm_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = "LLVM libunwind unw_step loop";
  p.cold_means = "no per-pc cache to flush (FDEs are found through .eh_frame_hdr on each step)";
  p.init = init;
  p.once = unw_step_loop;
  peers.push_back(p);
}

} // namespace bench
