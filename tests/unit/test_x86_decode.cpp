// The x86 layer: each stack effect and control-flow kind on assembler-made bytes
// (x86_decode_cases.S), errors on bad bytes, and lengths and direct targets over all of libc's
// code against objdump -d.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "elf/elf_file.hpp"
#include "test_support.hpp"
#include "x86/decoder.hpp"

using namespace ehelf;
using namespace ehelf::x86;
using K = StackOp::Kind;

#define X86_CASES(X)                                                                               \
  X(push_rbx)                                                                                      \
  X(push_rbp)                                                                                      \
  X(push_r15)                                                                                      \
  X(pop_rbx)                                                                                       \
  X(pop_rbp)                                                                                       \
  X(push_imm)                                                                                      \
  X(pushw_imm)                                                                                     \
  X(push_rsp_mem)                                                                                  \
  X(push_drap) X(push_indexed) X(push_rip) X(push_rsp) X(pop_rsp) X(pop_mem) X(pushf) X(popf)      \
      X(sub_rsp) X(add_rsp) X(add_rsp_big) X(sub_rsp_reg) X(lea_rsp_rsp) X(and_rsp) X(and_rsp_odd) \
          X(lea_drap) X(lea_rsp_drap) X(lea_rbp_rsp) X(lea_rsp_rbp) X(lea_indexed_rsp)             \
              X(mov_rsp_rbp) X(mov_rbp_rsp) X(mov_rsp_rdi) X(leave) X(enter) X(enter_nested)       \
                  X(store_rbp_slot) X(store_rsp_slot) X(load_rbp_slot) X(load_rsp_slot)            \
                      X(store_32bit) X(store_other_base) X(xor_ebp) X(mov_rsp_mem) X(xchg_rsp)     \
                          X(mov_rax_rbx) X(lea_rip) X(call_direct) X(call_reg) X(call_mem)         \
                              X(call_far) X(jmp_direct) X(jmp_reg) X(jmp_notrack) X(jmp_far) X(je) \
                                  X(jrcxz) X(loop) X(xbegin) X(ret) X(ret_imm) X(repz_ret) X(lret) \
                                      X(iretq) X(syscall) X(int80) X(int_other) X(sysret) X(hlt)   \
                                          X(ud2) X(int3) X(nop) X(endbr64) X(cpuid) X(avx512)

#define DECLARE_CASE(name) extern "C" const uint8_t x86_##name[], x86_##name##_end[];
X86_CASES(DECLARE_CASE)
extern "C" const uint8_t x86_target[];

namespace {

struct Bytes {
  const uint8_t* begin;
  const uint8_t* end;
  std::span<const uint8_t> span() const { return {begin, size_t(end - begin)}; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(begin); }
};

std::map<std::string, Bytes> cases() {
  std::map<std::string, Bytes> m;
#define ADD_CASE(name) m.emplace(#name, Bytes{x86_##name, x86_##name##_end});
  X86_CASES(ADD_CASE)
  return m;
}

struct Expect {
  Flow flow;
  std::vector<StackOp> ops;
  bool targets_label = false; // target == x86_target
};

StackOp rsp_add(int32_t d) {
  return {K::rsp_add, Reg::none, Reg::none, d};
}
StackOp align(int32_t a) {
  return {K::rsp_align, Reg::none, Reg::none, a};
}
StackOp copy(Reg dst, Reg base, int32_t d) {
  return {K::copy, dst, base, d};
}
StackOp store(Reg src, Reg base, int32_t d) {
  return {K::store, src, base, d};
}
StackOp load(Reg dst, Reg base, int32_t d) {
  return {K::load, dst, base, d};
}
StackOp push_memory(Reg base, int32_t d) {
  return {K::push_memory, Reg::none, base, d};
}
StackOp unmodelled(Reg r) {
  return {K::unmodelled, r, Reg::none, 0};
}

std::map<std::string, Expect> expectations() {
  const Reg rsp = Reg::rsp, rbp = Reg::rbp, none = Reg::none;
  return {
      {"push_rbx", {Flow::next, {rsp_add(-8), store(Reg::rbx, rsp, 0)}}},
      {"push_rbp", {Flow::next, {rsp_add(-8), store(rbp, rsp, 0)}}},
      {"push_r15", {Flow::next, {rsp_add(-8), store(Reg::r15, rsp, 0)}}},
      {"pop_rbx", {Flow::next, {load(Reg::rbx, rsp, 0), rsp_add(8)}}},
      {"pop_rbp", {Flow::next, {load(rbp, rsp, 0), rsp_add(8)}}},
      {"push_imm", {Flow::next, {rsp_add(-8), store(none, rsp, 0)}}},
      {"pushw_imm", {Flow::next, {rsp_add(-2)}}},
      // The address is taken before rsp moves: 16(%rsp) before is 24(%rsp) after.
      {"push_rsp_mem", {Flow::next, {rsp_add(-8), push_memory(rsp, 24)}}},
      {"push_drap", {Flow::next, {rsp_add(-8), push_memory(Reg::r10, -8)}}},
      {"push_indexed", {Flow::next, {rsp_add(-8), store(none, rsp, 0)}}},
      {"push_rip", {Flow::next, {rsp_add(-8), store(none, rsp, 0)}}},
      {"push_rsp", {Flow::next, {rsp_add(-8), store(none, rsp, 0)}}},
      {"pop_rsp", {Flow::next, {unmodelled(rsp)}}},
      {"pop_mem", {Flow::next, {rsp_add(8)}}},
      {"pushf", {Flow::next, {rsp_add(-8), store(none, rsp, 0)}}},
      {"popf", {Flow::next, {rsp_add(8)}}},
      {"sub_rsp", {Flow::next, {rsp_add(-0x28)}}},
      {"add_rsp", {Flow::next, {rsp_add(0x28)}}},
      {"add_rsp_big", {Flow::next, {rsp_add(0x10000)}}},
      {"sub_rsp_reg", {Flow::next, {unmodelled(rsp)}}},
      {"lea_rsp_rsp", {Flow::next, {rsp_add(-0x18)}}},
      {"and_rsp", {Flow::next, {align(32)}}},
      {"and_rsp_odd", {Flow::next, {unmodelled(rsp)}}},
      {"lea_drap", {Flow::next, {copy(Reg::r10, rsp, 8)}}},
      {"lea_rsp_drap", {Flow::next, {copy(rsp, Reg::r10, -8)}}},
      {"lea_rbp_rsp", {Flow::next, {copy(rbp, rsp, 16)}}},
      {"lea_rsp_rbp", {Flow::next, {copy(rsp, rbp, -24)}}},
      {"lea_indexed_rsp", {Flow::next, {unmodelled(rsp)}}},
      {"mov_rsp_rbp", {Flow::next, {copy(rbp, rsp, 0)}}},
      {"mov_rbp_rsp", {Flow::next, {copy(rsp, rbp, 0)}}},
      {"mov_rsp_rdi", {Flow::next, {copy(Reg::rdi, rsp, 0)}}},
      {"leave", {Flow::next, {copy(rsp, rbp, 0), load(rbp, rsp, 0), rsp_add(8)}}},
      {"enter", {Flow::next, {rsp_add(-8), store(rbp, rsp, 0), copy(rbp, rsp, 0), rsp_add(-16)}}},
      {"enter_nested", {Flow::next, {unmodelled(rsp), unmodelled(rbp)}}},
      {"store_rbp_slot", {Flow::next, {store(Reg::rbx, rbp, -8)}}},
      {"store_rsp_slot", {Flow::next, {store(Reg::r12, rsp, 0x10)}}},
      {"load_rbp_slot", {Flow::next, {load(Reg::rbx, rbp, -8)}}},
      {"load_rsp_slot", {Flow::next, {load(Reg::r12, rsp, 0x10)}}},
      {"store_32bit", {Flow::next, {}}},
      {"store_other_base", {Flow::next, {}}},
      {"xor_ebp", {Flow::next, {unmodelled(rbp)}}},
      {"mov_rsp_mem", {Flow::next, {unmodelled(rsp)}}},
      {"xchg_rsp", {Flow::next, {unmodelled(rsp)}}},
      {"mov_rax_rbx", {Flow::next, {}}},
      {"lea_rip", {Flow::next, {}}},
      {"call_direct", {Flow::call, {}, true}},
      {"call_reg", {Flow::call_indirect, {}}},
      {"call_mem", {Flow::call_indirect, {}}},
      {"call_far", {Flow::other, {unmodelled(rsp)}}},
      {"jmp_direct", {Flow::jump, {}, true}},
      {"jmp_reg", {Flow::jump_indirect, {}}},
      {"jmp_notrack", {Flow::jump_indirect, {}}},
      {"jmp_far", {Flow::other, {}}},
      {"je", {Flow::jump_conditional, {}, true}},
      {"jrcxz", {Flow::jump_conditional, {}, true}},
      {"loop", {Flow::jump_conditional, {}, true}},
      {"xbegin", {Flow::jump_conditional, {}, true}},
      {"ret", {Flow::ret, {}}},
      {"ret_imm", {Flow::ret, {rsp_add(16)}}},
      {"repz_ret", {Flow::ret, {}}},
      {"lret", {Flow::other, {unmodelled(rsp)}}},
      {"iretq", {Flow::other, {unmodelled(rsp)}}},
      {"syscall", {Flow::syscall, {}}},
      {"int80", {Flow::syscall, {}}},
      {"int_other", {Flow::other, {}}},
      {"sysret", {Flow::other, {}}},
      {"hlt", {Flow::trap, {}}},
      {"ud2", {Flow::trap, {}}},
      {"int3", {Flow::trap, {}}},
      {"nop", {Flow::next, {}}},
      {"endbr64", {Flow::next, {}}},
      {"cpuid", {Flow::next, {}}},
      {"avx512", {Flow::next, {}}},
  };
}

std::string describe(const Instruction& insn) {
  std::ostringstream s;
  s << flow_name(insn.flow) << " [";
  for (unsigned i = 0; i < insn.op_count; ++i) {
    const StackOp& op = insn.ops[i];
    s << " {" << int(op.kind) << " " << reg_name(op.reg) << " " << reg_name(op.base) << " "
      << op.disp << "}";
  }
  s << " ]";
  return s.str();
}

} // namespace

TEST(X86Decode, EachStackEffectAndFlowKind) {
  Decoder decoder;
  auto all = cases();
  auto expected = expectations();
  ASSERT_EQ(all.size(), expected.size());
  for (const auto& [name, bytes] : all) {
    SCOPED_TRACE(name);
    auto insn = decoder.decode(bytes.span(), bytes.address());
    ASSERT_TRUE(insn.ok()) << insn.error().to_string();
    const Expect& e = expected.at(name);
    EXPECT_EQ(insn->length, bytes.span().size()); // exactly one instruction per case
    EXPECT_EQ(insn->address, bytes.address());
    EXPECT_EQ(insn->flow, e.flow) << describe(*insn);
    ASSERT_EQ(insn->op_count, e.ops.size()) << describe(*insn);
    for (size_t i = 0; i < e.ops.size(); ++i)
      EXPECT_EQ(insn->ops[i], e.ops[i]) << describe(*insn);
    EXPECT_EQ(insn->has_target(), e.targets_label);
    if (e.targets_label) {
      EXPECT_EQ(insn->target, reinterpret_cast<uint64_t>(x86_target));
    }
  }
}

// Addresses put in a register as values (function pointers): rip-relative lea, mov of an
// immediate (zero-extended into a 32-bit register, sign-extended into a 64-bit one); not a load.
TEST(X86Decode, AddressValues) {
  Decoder decoder;
  auto all = cases();
  const Bytes& lea = all.at("lea_rip");
  EXPECT_EQ(EHELF_OK(decoder.decode(lea.span(), lea.address())).address_value,
            reinterpret_cast<uint64_t>(x86_target));
  auto value = [&](std::vector<uint8_t> bytes) {
    return EHELF_OK(decoder.decode(bytes, 0x401000)).address_value;
  };
  EXPECT_EQ(value({0xbf, 0x36, 0x11, 0x40, 0x00}), 0x401136u);             // mov $0x401136,%edi
  EXPECT_EQ(value({0x48, 0xc7, 0xc7, 0x36, 0x11, 0x40, 0x00}), 0x401136u); // mov $..,%rdi
  EXPECT_EQ(value({0x48, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff}), ~0ull);     // mov $-1,%rdi
  EXPECT_EQ(value({0x48, 0x8d, 0x3d, 0x10, 0x00, 0x00, 0x00}), 0x401017u); // lea 0x10(%rip),%rdi
  EXPECT_EQ(value({0x48, 0x8b, 0x3d, 0x10, 0x00, 0x00, 0x00}), 0u);        // mov 0x10(%rip),%rdi
  EXPECT_EQ(value({0x48, 0x8d, 0x7c, 0x24, 0x08}), 0u);                    // lea 8(%rsp),%rdi
  EXPECT_EQ(value({0x48, 0x89, 0xc3}), 0u);                                // mov %rax,%rbx
  EXPECT_TRUE(
      EHELF_OK(decoder.decode(std::vector<uint8_t>{0xbf, 1, 0, 0, 0}, 0)).address_value_immediate);
  EXPECT_FALSE(EHELF_OK(decoder.decode(lea.span(), lea.address())).address_value_immediate);
  EXPECT_EQ(EHELF_OK(decoder.decode(lea.span(), lea.address())).value_register, Reg::rdi);
  auto zero = EHELF_OK(decoder.decode(std::vector<uint8_t>{0xbf, 0, 0, 0, 0}, 0)); // mov $0,%edi
  EXPECT_TRUE(zero.address_value_immediate && zero.address_value == 0);
  EXPECT_EQ(zero.value_register, Reg::rdi);
  EXPECT_EQ(EHELF_OK(decoder.decode(std::vector<uint8_t>{0x48, 0x89, 0xc3}, 0)).value_register,
            Reg::none);
}

// The slot an indirect call or jump reads its target from, when named by address: `call
// *disp(%rip)` (with or without the notrack prefix), a PLT stub's `bnd jmp *disp(%rip)`;
// nothing for a register, a register-based slot, or a rip-relative lea (not a control transfer).
TEST(X86Decode, IndirectSlots) {
  Decoder decoder;
  auto slot = [&](std::vector<uint8_t> bytes) {
    return EHELF_OK(decoder.decode(bytes, 0x401000)).indirect_slot;
  };
  EXPECT_EQ(slot({0xff, 0x15, 0x10, 0x00, 0x00, 0x00}), 0x401016u);       // call *0x10(%rip)
  EXPECT_EQ(slot({0x3e, 0xff, 0x15, 0xf0, 0xff, 0xff, 0xff}), 0x400ff7u); // notrack call *-0x10
  EXPECT_EQ(slot({0xf2, 0xff, 0x25, 0x10, 0x00, 0x00, 0x00}), 0x401017u); // bnd jmp *0x10(%rip)
  EXPECT_EQ(slot({0xff, 0xd0}), 0u);                                      // call *%rax
  EXPECT_EQ(slot({0xff, 0x50, 0x08}), 0u);                                // call *8(%rax)
  EXPECT_EQ(slot({0x48, 0x8d, 0x3d, 0x10, 0x00, 0x00, 0x00}), 0u);        // lea 0x10(%rip),%rdi
  auto all = cases();
  const Bytes& call_mem = all.at("call_mem");
  EXPECT_EQ(EHELF_OK(decoder.decode(call_mem.span(), call_mem.address())).indirect_slot, 0u);
}

// Padding: every nop form gas and gcc use, and int3; not an ordinary instruction.
TEST(X86Decode, Padding) {
  Decoder decoder;
  auto padding = [&](std::vector<uint8_t> bytes) {
    return EHELF_OK(decoder.decode(bytes, 0)).padding;
  };
  EXPECT_TRUE(padding({0x90}));                   // nop
  EXPECT_TRUE(padding({0x66, 0x90}));             // xchg %ax,%ax
  EXPECT_TRUE(padding({0x0f, 0x1f, 0x40, 0x00})); // nopl 0(%rax)
  EXPECT_TRUE(padding({0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00})); // cs nopw
  EXPECT_TRUE(padding({0xcc}));                                                       // int3
  EXPECT_FALSE(padding({0x48, 0x89, 0xc3}));       // mov %rax,%rbx
  EXPECT_FALSE(padding({0xf3, 0x0f, 0x1e, 0xfa})); // endbr64
}

// The linear sweep: each instruction's offset in order, stopping where the visitor refuses one,
// at an undecodable byte, or at the end (offsets as objdump -d lists these bytes).
TEST(X86Decode, SweepVisitsInstructionsInOrder) {
  Decoder decoder;
  const std::vector<uint8_t> code = {0x53,             // push %rbx
                                     0x48, 0x89, 0xfb, // mov %rdi,%rbx
                                     0x66, 0x90,       // xchg %ax,%ax
                                     0xc3,             // ret
                                     0x06};            // (bad): no such instruction in 64-bit mode
  std::vector<uint64_t> offsets;
  auto all = [&](const Instruction&, uint64_t off) {
    offsets.push_back(off);
    return true;
  };
  EXPECT_EQ(decoder.sweep(code, 0x1000, all), 7u); // stops at the undecodable byte
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 1, 4, 6}));
  offsets.clear();
  EXPECT_EQ(decoder.sweep(std::span(code).first(7), 0x1000, all), 7u); // the end
  EXPECT_EQ(offsets.size(), 4u);
  // Refused: the sweep stops at that instruction, not after it.
  EXPECT_EQ(
      decoder.sweep(code, 0x1000, [](const Instruction& in, uint64_t) { return !in.padding; }), 4u);
  EXPECT_EQ(decoder.sweep(std::span<const uint8_t>(), 0x1000, all), 0u);
}

TEST(X86Decode, RegisterWritesAndRspDelta) {
  Decoder decoder;
  auto all = cases();
  auto writes = [&](const char* name) {
    const Bytes& b = all.at(name);
    return EHELF_OK(decoder.decode(b.span(), b.address())).writes;
  };
  auto bit = [](Reg r) { return uint16_t(1u << unsigned(r)); };
  EXPECT_EQ(writes("mov_rax_rbx"), bit(Reg::rbx));
  EXPECT_EQ(writes("store_32bit"), 0);
  EXPECT_EQ(writes("pop_rbx"), bit(Reg::rbx) | bit(Reg::rsp));
  EXPECT_EQ(writes("syscall"), bit(Reg::rax) | bit(Reg::rcx) | bit(Reg::r11));
  EXPECT_EQ(writes("cpuid"), bit(Reg::rax) | bit(Reg::rbx) | bit(Reg::rcx) | bit(Reg::rdx));
  EXPECT_EQ(writes("xor_ebp"), bit(Reg::rbp));
  EXPECT_EQ(writes("leave"), bit(Reg::rbp) | bit(Reg::rsp));
  const Bytes& enter = all.at("enter");
  EXPECT_EQ(EHELF_OK(decoder.decode(enter.span(), enter.address())).rsp_delta(), -24);
}

TEST(X86Decode, FormatsAttSyntax) {
  Decoder decoder;
  auto all = cases();
  auto text = [&](const char* name) {
    const Bytes& b = all.at(name);
    return decoder.format(b.span(), b.address());
  };
  EXPECT_EQ(text("push_rbx"), "push %rbx");
  EXPECT_EQ(text("mov_rsp_rbp"), "mov %rsp, %rbp");
  EXPECT_EQ(text("sub_rsp"), "sub $0x28, %rsp");
  EXPECT_EQ(text("push_drap"), "push -0x8(%r10)");
  EXPECT_EQ(text("store_rbp_slot"), "mov %rbx, -0x8(%rbp)");
  char target[32];
  std::snprintf(target, sizeof target, "call 0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<uint64_t>(x86_target)));
  EXPECT_EQ(text("call_direct"), target);
  const uint8_t bad[] = {0x06};
  EXPECT_EQ(decoder.format(bad, 0x1000), "(bad)");
}

TEST(X86Decode, BadBytesAreErrorsAtTheirAddress) {
  Decoder decoder;
  const uint8_t truncated[] = {0x48, 0x8b}; // mov with no ModRM
  const uint8_t invalid[] = {0x06};         // push %es: invalid in 64-bit mode
  const uint8_t lock_nop[] = {0xf0, 0x90};  // lock on a nop
  std::vector<uint8_t> too_long(16, 0x66);  // sixteen prefixes
  too_long.push_back(0x90);
  for (auto bytes : {std::span<const uint8_t>(truncated), std::span<const uint8_t>(invalid),
                     std::span<const uint8_t>(lock_nop), std::span<const uint8_t>(too_long),
                     std::span<const uint8_t>()}) {
    auto insn = decoder.decode(bytes, 0x4010);
    ASSERT_FALSE(insn.ok());
    EXPECT_TRUE(insn.error().has_offset);
    EXPECT_EQ(insn.error().offset, 0x4010u);
    EXPECT_NE(insn.error().to_string().find("cannot decode"), std::string::npos);
  }
  // A span shorter than the instruction is never read past: the 5-byte call cut to 4 bytes.
  const uint8_t call[] = {0xe8, 0, 0, 0, 0};
  EXPECT_FALSE(decoder.decode(std::span<const uint8_t>(call, 4), 0).ok());
  EXPECT_TRUE(decoder.decode(call, 0).ok());
}

namespace {

struct ObjdumpInsn {
  uint8_t length = 0;
  bool bad = false;
  std::optional<uint64_t> target; // direct call/jump target as objdump prints it
  std::optional<Flow> flow;       // for the mnemonics that say it: ret, call, syscall, hlt...
};

// The flow kind objdump's mnemonic implies, where it implies one (after prefixes).
std::optional<Flow> flow_of_mnemonic(const std::string& m, bool indirect) {
  if (m == "ret") return Flow::ret;
  if (m == "call") return indirect ? Flow::call_indirect : Flow::call;
  if (m == "jmp") return indirect ? Flow::jump_indirect : Flow::jump;
  if (m[0] == 'j' || m.rfind("loop", 0) == 0) return Flow::jump_conditional;
  if (m == "syscall") return Flow::syscall;
  if (m == "hlt" || m == "ud2" || m == "int3") return Flow::trap;
  return std::nullopt;
}

struct ObjdumpListing {
  std::map<uint64_t, ObjdumpInsn> insns;
  std::vector<uint64_t> starts; // symbol and section starts: where objdump resynchronises
};

// Parses `objdump -d --insn-width=16` output: "  29dc0:\tf3 0f 1e fa  \tendbr64".
ObjdumpListing parse_objdump(const std::string& text) {
  ObjdumpListing out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    uint64_t addr = 0;
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find(" <") != std::string::npos && line.back() == ':') {
      std::from_chars(line.data(), line.data() + line.find(' '), addr, 16);
      out.starts.push_back(addr);
      continue;
    }
    size_t colon = line.find(":\t");
    if (colon == std::string::npos || line.empty() || line[0] != ' ') continue;
    size_t first = line.find_first_not_of(' ');
    if (std::from_chars(line.data() + first, line.data() + colon, addr, 16).ec != std::errc())
      continue;
    std::string rest = line.substr(colon + 2);
    size_t tab = rest.find('\t');
    std::string hex = rest.substr(0, tab);
    std::string asm_text = tab == std::string::npos ? "" : rest.substr(tab + 1);
    ObjdumpInsn insn;
    std::istringstream bytes(hex);
    std::string byte;
    while (bytes >> byte)
      ++insn.length;
    insn.bad = asm_text.find("(bad)") != std::string::npos || asm_text.empty();
    // Direct branches print "call   29d50 <sym>", "jne    2a0b0 <sym+0x40>", also after
    // prefixes ("bnd jmp", "notrack"... take the last word before the operand).
    std::istringstream words(asm_text);
    std::vector<std::string> w;
    std::string word;
    while (words >> word)
      w.push_back(word);
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string& m = w[i];
      if (m == "bnd" || m == "notrack" || m == "repz" || m == "rep" || m == "ds") continue;
      insn.flow = flow_of_mnemonic(m, i + 1 < w.size() && w[i + 1][0] == '*');
      if (i + 1 == w.size()) break;
      bool branch = m == "call" || m.rfind("j", 0) == 0 || m.rfind("loop", 0) == 0 ||
                    m == "xbegin" || m == "callq" || m == "jmpq";
      if (!branch) continue;
      const std::string& op = w[i + 1];
      uint64_t t = 0;
      if (std::isxdigit(static_cast<unsigned char>(op[0])) &&
          std::from_chars(op.data(), op.data() + op.size(), t, 16).ec == std::errc() &&
          op.find_first_not_of("0123456789abcdef") == std::string::npos)
        insn.target = t;
      break;
    }
    out.insns[addr] = insn;
  }
  return out;
}

} // namespace

// Every instruction of libc's executable sections, decoded linearly from each symbol objdump
// shows (as objdump itself does), against objdump's lengths and direct targets.
TEST(X86Decode, AgreesWithObjdumpOnLibc) {
  const std::string path = test::libc_path();
  auto elf = ElfFile::open(path);
  ASSERT_TRUE(elf.ok()) << elf.error().to_string();
  ObjdumpListing listing =
      parse_objdump(test::run_command("objdump -d --insn-width=16 " + path + " 2>/dev/null"));
  ASSERT_GT(listing.insns.size(), 100000u);
  Decoder decoder;
  size_t compared = 0, same_length = 0, targets = 0, same_target = 0, objdump_bad = 0;
  size_t flows = 0, same_flow = 0;
  std::vector<std::string> mismatches;
  for (const Section& s : (*elf)->sections()) {
    if (!(s.flags & 0x4 /* SHF_EXECINSTR */) || s.type == 8 /* SHT_NOBITS */) continue;
    auto data = (*elf)->section_data(s);
    ASSERT_TRUE(data.ok());
    auto starts_it = listing.starts.begin();
    uint64_t next = s.addr; // where our linear decode is
    for (auto it = listing.insns.lower_bound(s.addr);
         it != listing.insns.end() && it->first < s.addr + data->size(); ++it) {
      auto [addr, od] = *it;
      // objdump restarts at each symbol; so do we. Anything else must be where we already are.
      while (starts_it != listing.starts.end() && *starts_it < addr)
        ++starts_it;
      bool resync = starts_it != listing.starts.end() && *starts_it == addr;
      if (od.bad) {
        ++objdump_bad;
        next = addr + od.length;
        continue;
      }
      ++compared;
      if (!resync && addr != next) {
        if (mismatches.size() < 20)
          mismatches.push_back(fmt::format("{:#x}: linear decode is at {:#x}", addr, next));
        next = addr;
      }
      auto insn = decoder.decode(data->subspan(addr - s.addr), addr);
      if (!insn.ok()) {
        if (mismatches.size() < 20) mismatches.push_back(insn.error().to_string());
        next = addr + od.length;
        continue;
      }
      next = addr + insn->length;
      if (insn->length == od.length)
        ++same_length;
      else if (mismatches.size() < 20)
        mismatches.push_back(
            fmt::format("{:#x}: length {} (objdump {})", addr, insn->length, od.length));
      if (od.flow) {
        ++flows;
        if (insn->flow == *od.flow)
          ++same_flow;
        else if (mismatches.size() < 20)
          mismatches.push_back(fmt::format("{:#x}: flow {} (objdump says {})", addr,
                                           flow_name(insn->flow), flow_name(*od.flow)));
      }
      if (od.target) {
        ++targets;
        if (insn->has_target() && insn->target == *od.target)
          ++same_target;
        else if (mismatches.size() < 20)
          mismatches.push_back(fmt::format("{:#x}: target {:#x} flow {} (objdump {:#x})", addr,
                                           insn->target, flow_name(insn->flow), *od.target));
      }
    }
  }
  std::string all;
  for (auto& m : mismatches)
    all += m + "\n";
  std::printf(
      "libc: %zu instructions compared, %zu same length; %zu direct branches, %zu same "
      "target; %zu branch/ret/syscall/trap, %zu same kind; %zu that objdump cannot decode\n",
      compared, same_length, targets, same_target, flows, same_flow, objdump_bad);
  EXPECT_EQ(same_length, compared) << all;
  EXPECT_EQ(same_target, targets) << all;
  EXPECT_EQ(same_flow, flows) << all;
  EXPECT_GT(flows, 60000u);
  EXPECT_GT(targets, 10000u);
}
