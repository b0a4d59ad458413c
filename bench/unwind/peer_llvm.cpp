// LLVM's libunwind (static libunwind.a from the libunwind-14-dev .deb, which conflicts with
// libunwind-dev and so lives in its own binary): the unw_step loop of its unw_* API.
#include <libunwind.h>

#include "peer.hpp"

namespace bench {
namespace {

__attribute__((noinline)) size_t step_once(uint64_t* pcs, size_t max, bool) {
  unw_context_t uc;
  unw_cursor_t cursor;
  if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) != 0) return 0;
  size_t n = 0;
  do {
    unw_word_t ip = 0;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    pcs[n++] = ip;
  } while (n < max && unw_step(&cursor) > 0);
  asm volatile("" ::: "memory");
  return n;
}

std::string init() { return ""; }

} // namespace

void add_llvm_peers(std::vector<Peer>& peers) {
  Peer p;
  p.name = "LLVM libunwind unw_step loop";
  p.cold_means = "no per-pc cache to flush (FDEs are found through .eh_frame_hdr on each step)";
  p.init = init;
  p.once = step_once;
  peers.push_back(p);
}

} // namespace bench
