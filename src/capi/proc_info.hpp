// What the C API says about a frame's procedure: its FDE (unw_get_proc_info, by cursor or by
// address), its name (unw_get_proc_name), whether it is a signal frame.
#pragma once

#include <cstddef>
#include <optional>

#include "capi/address_space.hpp"
#include "capi/cursor.hpp"
#include "model/unwind_table.hpp"

namespace ehelf::capi {

// A frame's module and the address looked up in it.
struct Where {
  ModuleMap* map = nullptr;
  const Module* module = nullptr;
  const ModuleData* data = nullptr;
  uint64_t lookup = 0; // the address looked up: the pc, or pc - 1 for a return address
};

// The module holding `lookup` in `map`, its data loaded through `memory` if needed (null: this
// process, where nothing is loaded after the space was built). False when none holds it.
bool locate_in(ModuleMap& map, uint64_t lookup, MemoryReader* memory, Where& w);
// Whether an FDE of a module of this process (loaded `map`: nothing is loaded) starts at `pc`.
bool is_function_entry(ModuleMap& map, uint64_t pc);
// The frame's module, looked up at pc - 1 for a return address; but at pc when no FDE covers
// pc - 1 and one covers pc (a function "returned" to at its entry: makecontext, as
// GeneralStep::step does), and when the FDE is a signal trampoline's ('S': its pc, e.g.
// __restore_rt's first instruction as a signal handler's return address, is looked up as is;
// pc - 1 is the nop that FDE covers for unwinders that subtract 1, outside any symbol).
bool locate(Cursor& c, Where& w);

int get_proc_info(Cursor& c, unw_proc_info_t* info);
int get_proc_name(Cursor& c, char* buf, size_t size, unw_word_t* offset);
int proc_info_by_ip(unw_addr_space* as, unw_word_t ip, unw_proc_info_t* info, void* arg);
int proc_name_by_ip(unw_addr_space* as, unw_word_t ip, char* buf, size_t size, unw_word_t* offset,
                    void* arg);

} // namespace ehelf::capi
