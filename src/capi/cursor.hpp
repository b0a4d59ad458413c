// unw_cursor_t: what it holds (Cursor) and the functions that walk and read it.
#pragma once

#include <cstdint>
#include <sys/ucontext.h>

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
  // The unwind entry the cursor looked up last is a signal trampoline's: unw_is_signal_frame's
  // answer (see is_signal_frame).
  bool last_entry_signal = false;
  // The signal context the kernel saved, from which a step read this frame's registers (the
  // interrupted frame, after the trampoline's); 0 for other frames. unw_resume returns there.
  uint64_t signal_context = 0;
  unw_addr_space* as = nullptr;
  void* arg = nullptr;         // remote: unw_init_remote's argument
  LocalSpace* local = nullptr; // local: the space the walk started with
  RegisterState regs;          // the current frame
  SaveSlots saved;             // where its registers' values are in memory (unw_get_save_loc)
  uint32_t range_count = 0;    // local: the readable stack ranges
  AddressRange ranges[LocalMemory::kMaxRanges];
};

Cursor* cursor_of(unw_cursor_t* cursor);

// The ucontext_t gregs slot of DWARF register `reg` (unw_context_t is a ucontext_t); inline:
// each walk's start reads and points at all 17 (every throw's phases, every _Unwind_Resume).
inline int greg_of_dwarf(unsigned reg) {
  constexpr int kGregOfDwarf[x86_64::kGeneralRegs] = {
      REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
      REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  return kGregOfDwarf[reg];
}

int init_local(unw_cursor_t* cursor, const unw_context_t* context, bool exact);
// Makes `c` a local cursor of space `s` on the frame `context` holds (its registers, their save
// slots in it), reading `ranges` directly; not exact (init_local decides that). Every field set.
void start_local(Cursor& c, LocalSpace& s, const unw_context_t& context, const LocalMemory& ranges);
int init_remote(unw_cursor_t* cursor, unw_addr_space* as, void* arg);
int step(Cursor& c);
// Before a local cursor's frame is unwound: if its module is a library loaded after the space
// was built that has since been replaced at its address, the module is forgotten, so that the
// step finds what is there now (LateModules::check_slot_at).
void check_late_module(const Cursor& c);

int get_reg(Cursor& c, int reg, unw_word_t* value);
int set_reg(Cursor& c, int reg, unw_word_t value);
int get_save_loc(Cursor& c, int reg, unw_save_loc_t* loc);
// As libunwind 1.6 on x86_64, whose answer is about the unwind entry the cursor looked up last:
// after unw_step, the frame it stepped out of (1 on the frame after __restore_rt, the
// interrupted one, whose registers a step took from the signal context); after
// unw_get_proc_info, the current frame's (1 on __restore_rt's frame itself, the frame the
// kernel made, as unw_is_signal_frame(3) describes a signal frame). 0 after unw_init_local(2),
// also with UNW_INIT_SIGNAL_FRAME. Reads the cursor only: safe in signal handlers.
int is_signal_frame(const Cursor& c);

// The cursor's memory: this process's (the cursor's stack ranges read directly), or the
// accessors'.
SelfMemory local_memory(const Cursor& c);

} // namespace ehelf::capi
