// libdwfl's frame callback collecting pcs, shared by the in-process benchmark (bench/unwind) and
// the perf-sample one (bench/table1).
#pragma once

#include <elfutils/libdwfl.h>

#include <cstddef>
#include <cstdint>

namespace bench {

// Where dwfl_getthread_frames writes: up to `max` pcs.
struct DwflWalk {
  uint64_t* pcs;
  size_t n, max;
};

// The dwfl_getthread_frames callback: appends the frame's pc; aborts the walk at `max`.
inline int dwfl_collect_pc(Dwfl_Frame* frame, void* arg) {
  auto* w = static_cast<DwflWalk*>(arg);
  Dwarf_Addr pc;
  bool activation;
  if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
  w->pcs[w->n++] = pc;
  return w->n == w->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

} // namespace bench
