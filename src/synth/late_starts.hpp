// Function starts found once the known ones are analysed: the synthesizer's rounds of discovery
// (synthesizer.cpp) add them and analyse again. Each is a list, computed from what the file says
// (Discovery) and what the analyses reached (SynthResult's sorted instructions).
#pragma once

#include <cstdint>
#include <vector>

#include "synth/discovery.hpp"
#include "synth/synthesizer.hpp"
#include "x86/decoder.hpp"

namespace ehelf::synth {

// Whether the instruction at `a` (after an endbr64, before `end`) opens a frame: a push of
// rbx, rbp or r12-r15, or a `sub $imm,%rsp`.
bool opens_frame(const x86::Decoder& decoder, const CodeSection& c, uint64_t a, uint64_t end);

// The address-taken code no analysis reached, outside the functions the file bounds.
std::vector<uint64_t> unreached_address_taken(const Discovery& d, const SynthResult& result);

// Code nothing found refers to (a stripped file's functions called only through pointers
// computed at run time, or never): in each gap between analysed code, past its padding (nop,
// int3), an instruction that opens a frame where a function can start: 16-byte aligned after
// padding, or right after a ret, jmp, ud2 or a call to a noreturn function. Landing pads, the
// other code no jump reaches, open no frame. Only without tables (their FDEs name every
// function): none when `d` has a shipped table.
std::vector<uint64_t> prologue_starts(const Discovery& d, const SynthResult& result,
                                      const x86::Decoder& decoder);

} // namespace ehelf::synth
