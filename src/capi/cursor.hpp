// unw_cursor_t: what it holds (Cursor) and the functions that walk and read it.
#pragma once

#include <cstdint>

#include "capi/address_space.hpp"
#include "model/register_state.hpp"
#include "runtime/memory.hpp"

namespace ehelf::capi {

// What unw_cursor_t holds. Trivially copyable: libunwind allows copying cursors with memcpy.
struct Cursor {
  static constexpr uint32_t kMagic = 0x65684355; // "UCeh"
  uint32_t magic = kMagic;
  bool remote = false;
  bool exact = false; // regs.rip is an interrupted instruction, not a return address
  bool done = false;  // the walk reached its end
  unw_addr_space* as = nullptr;
  void* arg = nullptr;         // remote: unw_init_remote's argument
  LocalSpace* local = nullptr; // local: the space the walk started with
  RegisterState regs;          // the current frame
  uint32_t range_count = 0;    // local: the readable stack ranges
  AddressRange ranges[LocalMemory::kMaxRanges];
};

Cursor* cursor_of(unw_cursor_t* cursor);

int init_local(unw_cursor_t* cursor, const unw_context_t* context, bool exact);
int init_remote(unw_cursor_t* cursor, unw_addr_space* as, void* arg);
int step(Cursor& c);

int get_reg(Cursor& c, int reg, unw_word_t* value);
int set_reg(Cursor& c, int reg, unw_word_t value);
int get_save_loc(Cursor& c, int reg, unw_save_loc_t* loc);

// The cursor's memory: this process's (the cursor's stack ranges read directly), or the
// accessors'.
SelfMemory local_memory(const Cursor& c);

} // namespace ehelf::capi
