// Machine code a JIT would write, and the .eh_frame it would register for it: for tests/eh/jit.cpp
// and bench/eh/register_bench.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

// push rbp; mov rbp, rsp; call *rdi; pop rbp; ret
const uint8_t kWithFramePointer[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3};
// Its CFA program: +1: cfa = rsp+16, rbp at cfa-16; +4: cfa = rbp+16; +7: cfa = rsp+8.
const uint8_t kWithFramePointerCfi[] = {0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6, 0x43, 0x0c, 7, 8};
// sub rsp, 8; call *rdi; add rsp, 8; ret: no frame pointer, rbp left as the caller had it.
const uint8_t kWithout[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd7, 0x48, 0x83, 0xc4, 0x08, 0xc3};
// +4: cfa = rsp+16; +10: cfa = rsp+8.
const uint8_t kWithoutCfi[] = {0x44, 0x0e, 16, 0x46, 0x0e, 8};

inline void put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i)
    v.push_back(uint8_t(x >> (8 * i)));
}
inline void put64(std::vector<uint8_t>& v, uint64_t x) {
  for (int i = 0; i < 8; ++i)
    v.push_back(uint8_t(x >> (8 * i)));
}
inline void pad_and_set_length(std::vector<uint8_t>& v, size_t start) {
  while ((v.size() - start) % 8)
    v.push_back(0); // DW_CFA_nop
  const uint32_t length = uint32_t(v.size() - start - 4);
  std::memcpy(&v[start], &length, 4);
}

// .eh_frame for `size` bytes of code at `pc` with CFA program `cfi`: a CIE (augmentation "zR",
// absolute pointers, cfa = rsp+8 and the return address at cfa-8) and one FDE, at offset
// kFdeOffset.
constexpr size_t kFdeOffset = 24;
inline std::vector<uint8_t> eh_frame_for(uint64_t pc, size_t size, const uint8_t* cfi,
                                         size_t cfi_size) {
  std::vector<uint8_t> v;
  put32(v, 0);                                               // CIE length, set below
  put32(v, 0);                                               // CIE id
  v.insert(v.end(), {1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x00}); // version .. R: DW_EH_PE_absptr
  v.insert(v.end(), {0x0c, 7, 8, 0x90, 1});                  // cfa = rsp+8; rip at cfa-8
  pad_and_set_length(v, 0);
  const size_t fde = v.size();
  put32(v, 0);                  // FDE length, set below
  put32(v, uint32_t(v.size())); // CIE pointer: back to offset 0
  put64(v, pc);                 // pc_begin
  put64(v, size);               // pc_range
  v.push_back(0);               // augmentation data length
  v.insert(v.end(), cfi, cfi + cfi_size);
  pad_and_set_length(v, fde);
  put32(v, 0); // terminator
  return v;
}

} // namespace
