// (One file of 1,000 lines: one decoder and evaluator's tests, every DW_OP decoded, run and printed.)
// Tests for Expression: decoding, evaluation, limits, and readelf-compatible printing.
//
// The printing tests use the real readelf as the oracle: once on expressions we assemble into an
// object with .cfi_escape (covering every op we print), and once on the expressions found in the
// .eh_frame of system libraries, which this file walks itself so that it depends only on the
// model and ELF layers.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "elf/elf_file.hpp"
#include "model/expression.hpp"
#include "report/expression_text.hpp"
#include "support/byte_cursor.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

using Bytes = std::vector<uint8_t>;

Expression must_decode(const Bytes& b) {
  auto e = Expression::decode(b);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().to_string());
  return e.ok() ? std::move(e).value() : Expression();
}

// Memory made of a few mapped ranges; everything else is refused.
class FakeMemory final : public MemoryReader {
public:
  void map(uint64_t addr, Bytes bytes) { ranges_[addr] = std::move(bytes); }
  void map_u64(uint64_t addr, uint64_t v) {
    Bytes b(8);
    std::memcpy(b.data(), &v, 8);
    map(addr, std::move(b));
  }
  bool read(uint64_t addr, void* out, size_t size) override {
    ++reads;
    for (const auto& [base, bytes] : ranges_) {
      if (addr >= base && addr - base <= bytes.size() && size <= bytes.size() - (addr - base)) {
        std::memcpy(out, bytes.data() + (addr - base), size);
        return true;
      }
    }
    return false;
  }
  int reads = 0;

private:
  std::map<uint64_t, Bytes> ranges_;
};

RegisterState regs_with(std::initializer_list<std::pair<unsigned, uint64_t>> values) {
  RegisterState r;
  for (auto [reg, v] : values)
    r.set(reg, v);
  return r;
}

uint64_t eval_ok(const Bytes& b, const RegisterState& regs = {},
                 std::optional<uint64_t> initial = std::nullopt,
                 std::optional<uint64_t> cfa = std::nullopt) {
  Expression e = must_decode(b);
  NoMemory mem;
  auto v = e.evaluate(regs, mem, initial, cfa);
  EXPECT_TRUE(v.ok()) << expression_text(e) << ": " << (v.ok() ? "" : v.error().to_string());
  return v.ok() ? *v : 0xdeadbeef;
}

// Evaluates and expects failure; returns the error for inspection.
Error eval_err(const Bytes& b, const RegisterState& regs = {}, const EvalLimits& limits = {},
               MemoryReader* mem = nullptr) {
  Expression e = must_decode(b);
  NoMemory none;
  auto v = e.evaluate(regs, mem ? *mem : none, std::nullopt, std::nullopt, limits);
  EXPECT_FALSE(v.ok()) << expression_text(e) << " evaluated to " << (v.ok() ? *v : 0);
  return v.ok() ? Error::plain("") : v.error();
}

Error decode_err(const Bytes& b) {
  auto e = Expression::decode(b);
  EXPECT_FALSE(e.ok()) << "decoded to: " << (e.ok() ? expression_text(*e) : "");
  return e.ok() ? Error::plain("") : e.error();
}

bool contains(const std::string& s, std::string_view what) {
  return s.find(what) != std::string::npos;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  pclose(p);
  return out;
}

bool have_tool(const char* name) {
  return !run(fmt::format("command -v {} 2>/dev/null", name)).empty();
}

// The PLT entry rule GCC/ld emit: CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0).
const Bytes kPlt = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};

// ---------------------------------------------------------------------------------------------
// Decoding

TEST(ExpressionDecode, PltExpression) {
  Expression e = must_decode(kPlt);
  ASSERT_EQ(e.ops().size(), 9u);
  EXPECT_EQ(e.ops()[0].opcode, 0x77);
  EXPECT_EQ(e.ops()[0].a, 8u);
  EXPECT_EQ(e.ops()[0].offset, 0u);
  EXPECT_EQ(e.ops()[1].opcode, 0x80);
  EXPECT_EQ(e.ops()[1].offset, 2u);
  EXPECT_EQ(e.ops()[2].offset, 4u);
  EXPECT_EQ(e.ops()[8].opcode, 0x22);
  EXPECT_EQ(e.ops()[8].offset, 10u);
  EXPECT_EQ(e.bytes(), kPlt);
  EXPECT_EQ(expression_text(e),
            "DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and; "
            "DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus");
}

TEST(ExpressionDecode, Operands) {
  Expression e = must_decode({
      0x09, 0x80,                   // const1s -128
      0x0b, 0x00, 0x80,             // const2s -32768
      0x0d, 0xff, 0xff, 0xff, 0xff, // const4s -1
      0x0c, 0x78, 0x56, 0x34, 0x12, // const4u
      0x10, 0xe5, 0x8e, 0x26,       // constu 624485
      0x11, 0x7f,                   // consts -1
      0x92, 0x10, 0x78,             // bregx 16, -8
      0x9d, 0x10, 0x20,             // bit_piece 16 32
      0x2f, 0x00, 0x00,             // skip 0 -> the next op
      0x96,                         // nop
  });
  const auto& ops = e.ops();
  ASSERT_EQ(ops.size(), 10u);
  EXPECT_EQ(static_cast<int64_t>(ops[0].a), -128);
  EXPECT_EQ(static_cast<int64_t>(ops[1].a), -32768);
  EXPECT_EQ(static_cast<int64_t>(ops[2].a), -1);
  EXPECT_EQ(ops[3].a, 0x12345678u);
  EXPECT_EQ(ops[4].a, 624485u);
  EXPECT_EQ(static_cast<int64_t>(ops[5].a), -1);
  EXPECT_EQ(ops[6].a, 16u);
  EXPECT_EQ(static_cast<int64_t>(ops[6].b), -8);
  EXPECT_EQ(ops[7].a, 16u);
  EXPECT_EQ(ops[7].b, 32u);
  EXPECT_EQ(ops[8].a, 0u);
  EXPECT_EQ(ops[8].b, 9u); // the nop
  EXPECT_EQ(ops[9].offset, 30u);
}

TEST(ExpressionDecode, AddressSize) {
  auto e8 = Expression::decode(Bytes{0x03, 1, 2, 3, 4, 5, 6, 7, 8}, 8);
  ASSERT_TRUE(e8.ok());
  EXPECT_EQ(e8->ops()[0].a, 0x0807060504030201u);
  auto e4 = Expression::decode(Bytes{0x03, 1, 2, 3, 4, 0x96}, 4);
  ASSERT_TRUE(e4.ok());
  EXPECT_EQ(e4->ops()[0].a, 0x04030201u);
  EXPECT_EQ(e4->ops().size(), 2u);
  EXPECT_FALSE(Expression::decode(Bytes{0x96}, 3).ok());
}

TEST(ExpressionDecode, BranchTargets) {
  // skip to the exact end maps to ops().size().
  Expression end = must_decode({0x31, 0x2f, 0x00, 0x00});
  EXPECT_EQ(end.ops()[1].b, 2u);
  // A backward bra to the first op.
  Expression back = must_decode({0x3a, 0x31, 0x1c, 0x12, 0x28, 0xfa, 0xff});
  EXPECT_EQ(static_cast<int64_t>(back.ops()[4].a), -6);
  EXPECT_EQ(back.ops()[4].b, 1u);
  // A forward skip over two ops.
  Expression fwd = must_decode({0x2f, 0x02, 0x00, 0x31, 0x32, 0x33});
  EXPECT_EQ(fwd.ops()[0].b, 3u);

  // Into the middle of const4u.
  Error mid = decode_err({0x31, 0x28, 0x01, 0x00, 0x0c, 0x01, 0x02, 0x03, 0x04});
  EXPECT_TRUE(mid.has_offset);
  EXPECT_EQ(mid.offset, 1u);
  EXPECT_TRUE(contains(mid.message, "DW_OP_bra")) << mid.message;
  EXPECT_TRUE(contains(mid.message, "not the start of an op")) << mid.message;
  // Past the end, and before the start.
  EXPECT_EQ(decode_err({0x31, 0x2f, 0x05, 0x00}).offset, 1u);
  EXPECT_EQ(decode_err({0x96, 0x96, 0x2f, 0x00, 0x80}).offset, 2u);
  // Into its own operand.
  EXPECT_EQ(decode_err({0x2f, 0xfe, 0xff}).offset, 0u);
}

TEST(ExpressionDecode, UnknownOpcodes) {
  for (uint8_t op :
       {0x00, 0x01, 0x02, 0x04, 0x05, 0x07, 0xaa, 0xdf, 0xe1, 0xe8, 0xf1, 0xf8, 0xff}) {
    Error err = decode_err({0x96, 0x96, op, 0x00, 0x00});
    EXPECT_TRUE(err.has_offset);
    EXPECT_EQ(err.offset, 2u) << int(op);
    EXPECT_TRUE(contains(err.message, fmt::format("{:#04x}", op))) << err.message;
    EXPECT_TRUE(dw_op_name(op).empty()) << int(op);
  }
}

TEST(ExpressionDecode, TruncatedOperands) {
  // Each a complete op; every strict prefix (after the opcode) must fail at the op's offset.
  const std::vector<Bytes> ops = {
      {0x03, 1, 2, 3, 4, 5, 6, 7, 8},
      {0x08, 1},
      {0x09, 1},
      {0x0a, 1, 2},
      {0x0b, 1, 2},
      {0x0c, 1, 2, 3, 4},
      {0x0d, 1, 2, 3, 4},
      {0x0e, 1, 2, 3, 4, 5, 6, 7, 8},
      {0x0f, 1, 2, 3, 4, 5, 6, 7, 8},
      {0x10, 0x80, 0x01},
      {0x11, 0xff, 0x7f},
      {0x15, 1},
      {0x23, 0x81, 0x01},
      {0x28, 0, 0},
      {0x2f, 0, 0},
      {0x77, 0x80, 0x01},
      {0x90, 0x81, 0x01},
      {0x91, 0x80, 0x7f},
      {0x92, 0x07, 0x80, 0x01},
      {0x93, 0x88, 0x01},
      {0x94, 4},
      {0x95, 4},
      {0x98, 1, 0},
      {0x99, 1, 0, 0, 0},
      {0x9a, 1, 0, 0, 0},
      {0x9d, 0x08, 0x00},
      {0x9e, 0x02, 0xaa, 0xbb},
      {0xa0, 1, 0, 0, 0, 5},
      {0xa1, 0x85, 0x01},
      {0xa3, 0x02, 0x75, 0x00},
      {0xa4, 0x10, 0x02, 0xaa, 0xbb},
      {0xa5, 0x81, 0x01, 0x20},
      {0xa6, 8, 0x30},
      {0xa8, 0x90, 0x01},
      {0xf3, 0x01, 0x55},
      {0xfa, 1, 0, 0, 0},
      {0xfd, 1, 0, 0, 0},
  };
  for (const Bytes& op : ops) {
    Bytes whole = {0x96};
    whole.insert(whole.end(), op.begin(), op.end());
    auto ok = Expression::decode(whole);
    EXPECT_TRUE(ok.ok()) << fmt::format("{:#04x}", op[0]) << ": "
                         << (ok.ok() ? "" : ok.error().message);
    for (size_t cut = 2; cut < whole.size(); ++cut) {
      Bytes part(whole.begin(), whole.begin() + static_cast<ptrdiff_t>(cut));
      Error err = decode_err(part);
      EXPECT_EQ(err.offset, 1u) << fmt::format("{:#04x} cut at {}", op[0], cut);
      EXPECT_TRUE(contains(err.message, "truncated")) << err.message;
    }
  }
  // A LEB128 that never ends.
  EXPECT_TRUE(contains(decode_err({0x10, 0x80, 0x80, 0x80}).message, "DW_OP_constu"));
  // Block length far past the end.
  EXPECT_EQ(decode_err({0x9e, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}).offset, 0u);
}

TEST(ExpressionDecode, EntryValueSubExpression) {
  Expression e = must_decode({0x96, 0xa3, 0x02, 0x75, 0x00, 0x9f});
  ASSERT_EQ(e.ops().size(), 3u);
  EXPECT_EQ(e.ops()[1].a, 2u);
  EXPECT_EQ(e.ops()[2].offset, 5u);
  // Garbage inside: the error points at the bad byte, counted from the outer start.
  Error err = decode_err({0x96, 0xa3, 0x02, 0x96, 0x01, 0x9f});
  EXPECT_EQ(err.offset, 4u);
  // Branch targets are confined to the sub-expression.
  EXPECT_FALSE(Expression::decode(Bytes{0xa3, 0x03, 0x2f, 0x01, 0x00, 0x96}).ok());
  // Nesting is bounded.
  Bytes nested = {0x96};
  for (int i = 0; i < 20; ++i) {
    Bytes outer = {0xf3, static_cast<uint8_t>(nested.size())};
    outer.insert(outer.end(), nested.begin(), nested.end());
    nested = outer;
  }
  EXPECT_TRUE(contains(decode_err(nested).message, "nested")) << decode_err(nested).message;
}

TEST(ExpressionDecode, EmptyAndNames) {
  Expression e = must_decode({});
  EXPECT_TRUE(e.ops().empty());
  EXPECT_EQ(expression_text(e), "");
  EXPECT_EQ(dw_op_name(0x06), "DW_OP_deref");
  EXPECT_EQ(dw_op_name(0x30), "DW_OP_lit0");
  EXPECT_EQ(dw_op_name(0x4f), "DW_OP_lit31");
  EXPECT_EQ(dw_op_name(0x6f), "DW_OP_reg31");
  EXPECT_EQ(dw_op_name(0x77), "DW_OP_breg7");
  EXPECT_EQ(dw_op_name(0x9c), "DW_OP_call_frame_cfa");
  EXPECT_EQ(dw_op_name(0xa3), "DW_OP_entry_value");
  EXPECT_EQ(dw_op_name(0xe0), "DW_OP_GNU_push_tls_address");
  EXPECT_EQ(dw_op_name(0xf0), "DW_OP_GNU_uninit");
  EXPECT_EQ(dw_op_name(0xf3), "DW_OP_GNU_entry_value");
  EXPECT_EQ(dw_op_name(0xfa), "DW_OP_GNU_parameter_ref");
}

// ---------------------------------------------------------------------------------------------
// Evaluation

TEST(ExpressionEval, PltBothBranches) {
  Expression e = must_decode(kPlt);
  NoMemory mem;
  const uint64_t rsp = 0x7ffc12345670;
  for (uint64_t low = 0; low < 16; ++low) {
    uint64_t rip = 0x401020 + low;
    auto cfa = e.evaluate(regs_with({{x86_64::RSP, rsp}, {x86_64::RIP, rip}}), mem);
    ASSERT_TRUE(cfa.ok()) << cfa.error().to_string();
    EXPECT_EQ(*cfa, rsp + 8 + (low >= 11 ? 8 : 0)) << "rip low nibble " << low;
  }
  // Without rip known the rule cannot be computed.
  auto err = e.evaluate(regs_with({{x86_64::RSP, rsp}}), mem);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().offset, 2u);
  EXPECT_TRUE(contains(err.error().message, "DW_OP_breg16")) << err.error().message;
  EXPECT_TRUE(contains(err.error().message, "rip")) << err.error().message;
}

TEST(ExpressionEval, DrapDeref) {
  // DW_CFA_def_cfa_expression (DW_OP_breg6 (rbp): -8; DW_OP_deref), as GCC emits for realigned
  // stacks: the CFA was saved just below the frame pointer.
  Expression e = must_decode({0x76, 0x78, 0x06});
  EXPECT_EQ(expression_text(e), "DW_OP_breg6 (rbp): -8; DW_OP_deref");
  FakeMemory mem;
  mem.map_u64(0x7ffd0000 - 8, 0x7ffd1230);
  auto v = e.evaluate(regs_with({{x86_64::RBP, 0x7ffd0000}}), mem);
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(*v, 0x7ffd1230u);
  EXPECT_EQ(mem.reads, 1);

  // The same rule with memory that refuses: the error names the address.
  auto refused = e.evaluate(regs_with({{x86_64::RBP, 0x1000}}), mem);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "0xff8")) << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "DW_OP_deref")) << refused.error().message;
  EXPECT_EQ(refused.error().offset, 2u);
}

TEST(ExpressionEval, Constants) {
  EXPECT_EQ(eval_ok({0x08, 0xff}), 255u);
  EXPECT_EQ(eval_ok({0x09, 0xff}), ~uint64_t{0});
  EXPECT_EQ(eval_ok({0x0a, 0x34, 0x12}), 0x1234u);
  EXPECT_EQ(eval_ok({0x0b, 0x00, 0x80}), static_cast<uint64_t>(-32768));
  EXPECT_EQ(eval_ok({0x0c, 0x78, 0x56, 0x34, 0x12}), 0x12345678u);
  EXPECT_EQ(eval_ok({0x0d, 0xfe, 0xff, 0xff, 0xff}), static_cast<uint64_t>(-2));
  EXPECT_EQ(eval_ok({0x0e, 1, 2, 3, 4, 5, 6, 7, 8}), 0x0807060504030201u);
  EXPECT_EQ(eval_ok({0x0f, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}),
            static_cast<uint64_t>(-2));
  EXPECT_EQ(eval_ok({0x10, 0xe5, 0x8e, 0x26}), 624485u);
  EXPECT_EQ(eval_ok({0x11, 0x40}), static_cast<uint64_t>(-64));
  EXPECT_EQ(eval_ok({0x03, 0x00, 0x10, 0x40, 0, 0, 0, 0, 0}), 0x401000u);
  for (uint8_t i = 0; i < 32; ++i)
    EXPECT_EQ(eval_ok({static_cast<uint8_t>(0x30 + i)}), i);
}

TEST(ExpressionEval, Arithmetic) {
  const uint64_t m1 = ~uint64_t{0};
  const uint64_t min = uint64_t{1} << 63;
  struct Case {
    Bytes code;
    uint64_t want;
  };
  const std::vector<Case> cases = {
      {{0x35, 0x33, 0x1c}, 2},                                    // 5 - 3
      {{0x33, 0x35, 0x1c}, static_cast<uint64_t>(-2)},            // 3 - 5
      {{0x35, 0x33, 0x22}, 8},                                    // plus
      {{0x09, 0xff, 0x31, 0x22}, 0},                              // -1 + 1 wraps
      {{0x36, 0x37, 0x1e}, 42},                                   // mul
      {{0x09, 0xf9, 0x32, 0x1b}, static_cast<uint64_t>(-3)},      // -7 / 2 truncates
      {{0x3a, 0x09, 0xfd, 0x1b}, static_cast<uint64_t>(-3)},      // 10 / -3
      {{0x0f, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x09, 0xff, 0x1b}, min}, // INT64_MIN / -1
      {{0x09, 0xff, 0x3a, 0x1d}, 5},                              // mod is unsigned: 2^64-1 % 10
      {{0x3a, 0x33, 0x1d}, 1},                                    // 10 % 3
      {{0x35, 0x1f}, static_cast<uint64_t>(-5)},                  // neg
      {{0x0f, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x1f}, min},             // neg INT64_MIN
      {{0x30, 0x20}, m1},                                         // not
      {{0x09, 0xfb, 0x19}, 5},                                    // abs -5
      {{0x35, 0x19}, 5},                                          // abs 5
      {{0x0f, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x19}, min},             // abs INT64_MIN
      {{0x3c, 0x3a, 0x1a}, 8},                                    // 12 & 10
      {{0x3c, 0x3a, 0x21}, 14},                                   // 12 | 10
      {{0x3c, 0x3a, 0x27}, 6},                                    // 12 ^ 10
      {{0x31, 0x23, 0xac, 0x02}, 301},                            // plus_uconst 300
      {{0x31, 0x08, 63, 0x24}, min},                              // 1 << 63
      {{0x31, 0x08, 64, 0x24}, 0},                                // 1 << 64
      {{0x31, 0x09, 0xff, 0x24}, 0},                              // 1 << 2^64-1
      {{0x09, 0xff, 0x34, 0x25}, m1 >> 4},                        // shr
      {{0x09, 0xff, 0x08, 200, 0x25}, 0},                         // shr 200
      {{0x09, 0xf0, 0x32, 0x26}, static_cast<uint64_t>(-4)},      // -16 >>a 2
      {{0x40, 0x32, 0x26}, 4},                                    // 16 >>a 2
      {{0x09, 0xf0, 0x08, 64, 0x26}, m1},                         // -16 >>a 64
      {{0x40, 0x08, 64, 0x26}, 0},                                // 16 >>a 64
      {{0x40, 0x30, 0x26}, 16},                                   // >>a 0
      // Relational ops compare `second OP top` as signed values.
      {{0x09, 0xff, 0x31, 0x2d}, 1}, // -1 < 1
      {{0x09, 0xff, 0x31, 0x2b}, 0}, // -1 > 1
      {{0x31, 0x31, 0x2a}, 1},       // 1 >= 1
      {{0x31, 0x32, 0x2a}, 0},       // 1 >= 2
      {{0x31, 0x32, 0x2c}, 1},       // 1 <= 2
      {{0x32, 0x31, 0x2c}, 0},       // 2 <= 1
      {{0x33, 0x33, 0x29}, 1},       // eq
      {{0x33, 0x34, 0x29}, 0},
      {{0x33, 0x34, 0x2e}, 1}, // ne
      {{0x33, 0x33, 0x2e}, 0},
      {{0x32, 0x09, 0xff, 0x2b}, 1}, // 2 > -1
  };
  for (const auto& c : cases)
    EXPECT_EQ(eval_ok(c.code), c.want) << expression_text(must_decode(c.code));
}

TEST(ExpressionEval, StackOps) {
  EXPECT_EQ(eval_ok({0x37, 0x12, 0x22}), 14u);            // dup
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x13}), 1u);             // drop
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x14}), 1u);             // over copies the second
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x14, 0x13}), 2u);       // ...and keeps both
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x33, 0x15, 0x00}), 3u); // pick 0 = dup
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x33, 0x15, 0x02}), 1u); // pick 2
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x16}), 1u);             // swap
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x16, 0x1c}), 1u);       // 2 - 1 after swap
  // rot: [1 2 3] -> [3 1 2]
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x33, 0x17}), 2u);
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x33, 0x17, 0x13}), 1u);
  EXPECT_EQ(eval_ok({0x31, 0x32, 0x33, 0x17, 0x13, 0x13}), 3u);
  EXPECT_EQ(eval_ok({0x96, 0x35, 0x96}), 5u); // nop
}

TEST(ExpressionEval, ControlFlow) {
  // skip over lit2: result lit1.
  EXPECT_EQ(eval_ok({0x31, 0x2f, 0x01, 0x00, 0x32}), 1u);
  // bra taken / not taken.
  EXPECT_EQ(eval_ok({0x35, 0x31, 0x28, 0x01, 0x00, 0x36}), 5u);
  EXPECT_EQ(eval_ok({0x35, 0x30, 0x28, 0x01, 0x00, 0x36}), 6u);
  // Count down from 10: lit10; L: lit1; minus; dup; bra L.
  const Bytes countdown = {0x3a, 0x31, 0x1c, 0x12, 0x28, 0xfa, 0xff};
  EXPECT_EQ(eval_ok(countdown), 0u);
  // 1 + 10 iterations of 4 ops.
  Expression e = must_decode(countdown);
  NoMemory mem;
  EXPECT_TRUE(e.evaluate({}, mem, std::nullopt, std::nullopt, {41, 64}).ok());
  auto limited = e.evaluate({}, mem, std::nullopt, std::nullopt, {40, 64});
  ASSERT_FALSE(limited.ok());
  EXPECT_TRUE(contains(limited.error().message, "step limit")) << limited.error().message;
}

TEST(ExpressionEval, LoopsHitStepLimit) {
  // skip to itself.
  Error self = eval_err({0x2f, 0xfd, 0xff});
  EXPECT_TRUE(contains(self.message, "step limit")) << self.message;
  EXPECT_EQ(self.offset, 0u);
  // lit1; bra back to lit1: stack stays bounded, so only the step limit stops it.
  Error bra = eval_err({0x31, 0x28, 0xfc, 0xff});
  EXPECT_TRUE(contains(bra.message, "step limit")) << bra.message;
  Error small = eval_err({0x31, 0x28, 0xfc, 0xff}, {}, {5, 64});
  EXPECT_TRUE(contains(small.message, "(5)")) << small.message;
}

TEST(ExpressionEval, StackLimits) {
  // lit1; L: dup; skip L  -> grows until the depth limit.
  Error grow = eval_err({0x31, 0x12, 0x2f, 0xfc, 0xff});
  EXPECT_TRUE(contains(grow.message, "overflow")) << grow.message;
  EXPECT_EQ(grow.offset, 1u);
  Error three = eval_err({0x31, 0x32, 0x33}, {}, {100, 2});
  EXPECT_TRUE(contains(three.message, "overflow")) << three.message;
  EXPECT_EQ(three.offset, 2u);
  // Larger limits than the inline stack work too.
  Bytes deep;
  for (int i = 0; i < 200; ++i)
    deep.push_back(0x31);
  for (int i = 0; i < 199; ++i)
    deep.push_back(0x22);
  Expression e = must_decode(deep);
  NoMemory mem;
  auto v = e.evaluate({}, mem, std::nullopt, std::nullopt, {10000, 256});
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(*v, 200u);
  EXPECT_FALSE(e.evaluate({}, mem).ok()); // default depth 64

  // Underflow, per op.
  for (const Bytes& b : std::vector<Bytes>{{0x13},
                                           {0x12},
                                           {0x31, 0x14},
                                           {0x31, 0x16},
                                           {0x31, 0x32, 0x17},
                                           {0x31, 0x22},
                                           {0x1c},
                                           {0x1f},
                                           {0x19},
                                           {0x20},
                                           {0x06},
                                           {0x94, 0x04},
                                           {0x23, 0x01},
                                           {0x28, 0x00, 0x00},
                                           {0x31, 0x2d}}) {
    Error err = eval_err(b);
    EXPECT_TRUE(contains(err.message, "underflow")) << err.message;
  }
  Error pick = eval_err({0x31, 0x15, 0x01});
  EXPECT_TRUE(contains(pick.message, "DW_OP_pick")) << pick.message;
  // Empty result.
  Error empty = eval_err({0x31, 0x13});
  EXPECT_TRUE(contains(empty.message, "empty")) << empty.message;
  eval_err({});
  eval_err({0x96});
}

TEST(ExpressionEval, InitialAndCfa) {
  // DW_CFA_expression pushes the CFA first.
  EXPECT_EQ(eval_ok({0x23, 0x10}, {}, 100), 116u);
  EXPECT_EQ(eval_ok({}, {}, 7), 7u);
  EXPECT_EQ(eval_ok({0x9c, 0x08, 0x10, 0x1c}, {}, std::nullopt, 0x1000), 0xff0u);
  Error err = eval_err({0x96, 0x9c});
  EXPECT_TRUE(contains(err.message, "DW_OP_call_frame_cfa")) << err.message;
  EXPECT_EQ(err.offset, 1u);
  // A zero-depth stack cannot even hold the initial value.
  Expression e = must_decode({0x96});
  NoMemory mem;
  EXPECT_FALSE(e.evaluate({}, mem, 5, std::nullopt, {10, 0}).ok());
}

TEST(ExpressionEval, Registers) {
  RegisterState regs = regs_with({{x86_64::RSP, 0x1000}, {x86_64::R15, 0x2000}});
  EXPECT_EQ(eval_ok({0x77, 0x10}, regs), 0x1010u);
  EXPECT_EQ(eval_ok({0x7f, 0x70}, regs), 0x1ff0u);      // breg15 -16
  EXPECT_EQ(eval_ok({0x92, 0x07, 0x78}, regs), 0xff8u); // bregx rsp -8
  Error unknown = eval_err({0x70, 0x00}, regs);         // breg0, rax not known
  EXPECT_TRUE(contains(unknown.message, "rax")) << unknown.message;
  EXPECT_TRUE(contains(eval_err({0x92, 0x11, 0x00}, regs).message, "xmm0"));
  eval_err({0x92, 0x80, 0x08, 0x00}, regs);                   // bregx 1024
  eval_err({0x92, 0x87, 0x80, 0x80, 0x80, 0x10, 0x00}, regs); // bregx 2^32 + 7
  eval_err({0x81, 0x00}, regs);                               // breg17: not a general register
}

TEST(ExpressionEval, MemoryReads) {
  FakeMemory mem;
  mem.map(0x5000, {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11});
  RegisterState regs = regs_with({{x86_64::RAX, 0x5000}});
  auto eval = [&](const Bytes& b) {
    Expression e = must_decode(b);
    return e.evaluate(regs, mem);
  };
  EXPECT_EQ(*eval({0x70, 0x00, 0x06}), 0x1122334455667788u);
  EXPECT_EQ(*eval({0x70, 0x00, 0x94, 0x01}), 0x88u); // zero-extended
  EXPECT_EQ(*eval({0x70, 0x00, 0x94, 0x02}), 0x7788u);
  EXPECT_EQ(*eval({0x70, 0x00, 0x94, 0x04}), 0x55667788u);
  EXPECT_EQ(*eval({0x70, 0x04, 0x94, 0x04}), 0x11223344u);
  EXPECT_EQ(*eval({0x70, 0x00, 0x94, 0x08}), 0x1122334455667788u);
  for (uint8_t bad : {0, 9, 16}) {
    auto r = eval({0x70, 0x00, 0x94, bad});
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error().message, "DW_OP_deref_size")) << r.error().message;
  }
  // One byte past the mapping.
  auto r = eval({0x70, 0x01, 0x06});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "0x5001")) << r.error().message;
  EXPECT_EQ(r.error().offset, 2u);
  // The 4-byte address size derefs 4 bytes.
  auto e4 = Expression::decode(Bytes{0x70, 0x00, 0x06}, 4);
  ASSERT_TRUE(e4.ok());
  EXPECT_EQ(EHELF_OK(e4->evaluate(regs, mem)), 0x55667788u);
}

TEST(ExpressionEval, OpsNotValidInCfi) {
  RegisterState regs = regs_with({{x86_64::RSP, 0x1000}});
  const std::vector<Bytes> invalid = {
      {0x50},                   // reg0
      {0x6f},                   // reg31
      {0x90, 0x07},             // regx
      {0x91, 0x08},             // fbreg
      {0x31, 0x93, 0x08},       // piece
      {0x31, 0x9d, 0x08, 0x00}, // bit_piece
      {0x97},                   // push_object_address
      {0x98, 0x10, 0x00},       // call2
      {0x99, 0x10, 0, 0, 0},    // call4
      {0x9a, 0x10, 0, 0, 0},    // call_ref
      {0x31, 0x9b},             // form_tls_address
      {0x31, 0xe0},             // GNU_push_tls_address
      {0x9e, 0x01, 0x05},       // implicit_value
      {0x31, 0x9f},             // stack_value
      {0xa0, 1, 0, 0, 0, 0},    // implicit_pointer
      {0xa1, 0x00},             // addrx
      {0xa2, 0x00},             // constx
      {0xa3, 0x02, 0x75, 0x00}, // entry_value
      {0xf3, 0x01, 0x55},       // GNU_entry_value
      {0xa4, 0x10, 0x01, 0x05}, // const_type
      {0xa5, 0x07, 0x10},       // regval_type
      {0x31, 0xa6, 0x08, 0x10}, // deref_type
      {0x31, 0xa8, 0x10},       // convert
      {0x31, 0xa9, 0x10},       // reinterpret
      {0x31, 0x31, 0x18},       // xderef
      {0x31, 0x31, 0x95, 0x04}, // xderef_size
      {0x31, 0xf0},             // GNU_uninit
      {0xfa, 1, 0, 0, 0},       // GNU_parameter_ref
      {0xfb, 0x00},             // GNU_addr_index
      {0xfc, 0x00},             // GNU_const_index
      {0xfd, 1, 0, 0, 0},       // GNU_variable_value
  };
  for (const Bytes& b : invalid) {
    Expression e = must_decode(b);
    Error err = eval_err(b, regs);
    std::string_view name = dw_op_name(e.ops().back().opcode);
    EXPECT_TRUE(contains(err.message, name)) << err.message;
    EXPECT_EQ(err.offset, e.ops().back().offset) << err.message;
  }
}

TEST(ExpressionEval, DivisionByZero) {
  Error div = eval_err({0x35, 0x30, 0x1b});
  EXPECT_TRUE(contains(div.message, "division by zero")) << div.message;
  EXPECT_EQ(div.offset, 2u);
  Error mod = eval_err({0x35, 0x30, 0x1d});
  EXPECT_TRUE(contains(mod.message, "by zero")) << mod.message;
}

// Random bytes never crash decoding, evaluation or printing, and decoded ops are consistent.
TEST(ExpressionEval, RandomBytesAreSafe) {
  std::mt19937 rng(12345);
  FakeMemory mem;
  mem.map(0x1000, Bytes(64, 0x10));
  RegisterState regs;
  for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r)
    regs.set(r, 0x1000 + 8 * r);
  // Bias towards real opcodes so that some inputs decode.
  const Bytes common = {0x06, 0x08, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x19, 0x1a,
                        0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x22, 0x23, 0x24, 0x25,
                        0x26, 0x28, 0x29, 0x2f, 0x31, 0x3f, 0x77, 0x94, 0x96, 0x9c};
  int decoded = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    Bytes b(rng() % 12);
    for (auto& x : b)
      x = rng() % 3 ? common[rng() % common.size()] : static_cast<uint8_t>(rng());
    auto e = Expression::decode(b);
    if (!e.ok()) {
      EXPECT_TRUE(e.error().has_offset || e.error().message.size());
      EXPECT_LE(e.error().offset, b.size());
      continue;
    }
    ++decoded;
    uint32_t last = 0;
    for (size_t i = 0; i < e->ops().size(); ++i) {
      const ExprOp& op = e->ops()[i];
      if (i) {
        EXPECT_GT(op.offset, last);
      }
      last = op.offset;
      if (op.opcode == 0x28 || op.opcode == 0x2f) {
        EXPECT_LE(op.b, e->ops().size());
      }
    }
    (void)expression_text(*e);
    (void)e->evaluate(regs, mem, 0x1000, 0x1008, {500, 16});
  }
  EXPECT_GT(decoded, 1000);
}

// ---------------------------------------------------------------------------------------------
// Printing, checked against readelf

TEST(ExpressionToString, Examples) {
  EXPECT_EQ(expression_text(must_decode({0x77, 0x08, 0x06, 0x23, 0x10})),
            "DW_OP_breg7 (rsp): 8; DW_OP_deref; DW_OP_plus_uconst: 16");
  EXPECT_EQ(expression_text(must_decode({0x92, 0x80, 0x01, 0x7f})), "DW_OP_bregx: 128 (r128) -1");
  EXPECT_EQ(expression_text(must_decode({0x9e, 0x02, 0xde, 0x0a})),
            "DW_OP_implicit_value 2 byte block: de a ");
  EXPECT_EQ(expression_text(must_decode({0x9a, 1, 0, 0, 0, 0x96})),
            "(DW_OP_call_ref in frame info)");
}

// Assembles each expression into a DW_CFA_def_cfa_expression and compares with readelf's text.
TEST(ExpressionToString, MatchesReadelfOnEveryOp) {
  if (!have_tool("readelf") || !have_tool("as")) GTEST_SKIP() << "needs readelf and as";
  const std::vector<Bytes> exprs = {
      {0x0c, 0x78, 0x56, 0x34, 0x12},
      {0x0e, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11},
      {0x0f, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
      {0x0f, 0, 0, 0, 0, 0, 0, 0, 0x80},
      {0x0d, 0xfe, 0xff, 0xff, 0xff},
      {0x08, 0xff, 0x09, 0x80, 0x0a, 0xff, 0xff, 0x0b, 0x00, 0x80},
      {0x10, 0xe5, 0x8e, 0x26, 0x11, 0x7f, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0x01},
      {0x03, 0x34, 0x12, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0, 0, 0},
      {0x06, 0x12, 0x13, 0x14, 0x15, 0x02, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c,
       0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x80, 0x01, 0x24, 0x25, 0x26, 0x27},
      {0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x94, 0x04, 0x95, 0x08, 0x96},
      {0x2f, 0x03, 0x00, 0x28, 0xfd, 0xff, 0x96, 0x2f, 0x00, 0x00},
      {0x30, 0x31, 0x3f, 0x40, 0x4f},
      {0x50, 0x51, 0x57, 0x60, 0x61, 0x6f, 0x90, 0x11, 0x90, 0x80, 0x01, 0x90, 0x3a, 0x90, 0x39},
      {0x70, 0x00, 0x71, 0x7f, 0x76, 0x78, 0x7f, 0x80, 0x01, 0x80, 0x00, 0x81, 0x08, 0x8f, 0x10},
      {0x92, 0x11, 0x08, 0x92, 0x80, 0x01, 0x7f, 0x92, 0x21, 0x00, 0x92, 0x3b, 0x00, 0x91, 0x7c},
      {0x92, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x90, 0x80, 0x80, 0x80, 0x80, 0x10},
      {0x93, 0x08, 0x9d, 0x10, 0x20, 0x9c},
      {0x9d, 0x10, 0x20},
      {0x97, 0x9b, 0x9c, 0xe0, 0xf0, 0x9f},
      {0x9e, 0x04, 0xde, 0xad, 0xbe, 0xef, 0x96},
      {0x9e, 0x00},
      {0x98, 0x10, 0x00, 0x99, 0x20, 0x00, 0x00, 0x00, 0x98, 0x07, 0x96, 0x98, 0x00, 0x00},
      {0x99, 0x00, 0x00, 0x00, 0x80},
      {0xa3, 0x02, 0x75, 0x00, 0x9f},
      {0xf3, 0x01, 0x55, 0x9f},
      {0xa3, 0x00},
      {0xa3, 0x06, 0x9a, 0x01, 0x00, 0x00, 0x00, 0x96, 0x31},
      {0xf3, 0x04, 0xf3, 0x02, 0x31, 0x32, 0x33},
      {0xa1, 0x05, 0xa1, 0x00},
      {0xa4, 0x10, 0x04, 1, 2, 3, 0xff, 0x96},
      {0xa5, 0x11, 0x20, 0xa6, 0x08, 0x30},
      {0xa8, 0x00, 0xa8, 0x10, 0xa9, 0x20, 0xa9, 0x00},
      {0xfa, 1, 0, 0, 0, 0xfb, 0x05, 0xfc, 0x06, 0xfc, 0x00},
      {0xf4, 0x10, 0x00, 0xf5, 0x11, 0x20, 0xf6, 0x08, 0x30, 0xf7, 0x00, 0xf7, 0x10, 0xf9, 0x20},
      {0x96, 0x9a, 1, 0, 0, 0, 0x96},
      {0xa0, 1, 0, 0, 0, 0x05, 0x96},
      {0xf2, 1, 0, 0, 0, 0x05},
      {0x31, 0xfd, 1, 0, 0, 0, 0x96},
      {0x31, 0xa2, 0x05, 0x96},
      {0xa7, 0x08, 0x30},
  };
  char dir_template[] = "/tmp/ehelf_expr_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::filesystem::path dir(dir_template);
  {
    std::ofstream s(dir / "exprs.s");
    s << ".text\n.globl f\nf:\n.cfi_startproc\n";
    for (const Bytes& e : exprs) {
      ASSERT_LT(e.size(), 128u);
      s << "nop\n.cfi_escape 0x0f, " << e.size();
      for (uint8_t b : e)
        s << ", " << unsigned(b);
      s << "\n";
    }
    s << "ret\n.cfi_endproc\n";
  }
  std::string as_out = run(fmt::format("as {0}/exprs.s -o {0}/exprs.o 2>&1", dir.string()));
  ASSERT_TRUE(std::filesystem::exists(dir / "exprs.o")) << as_out;
  std::string text = run(fmt::format("readelf -wf {}/exprs.o", dir.string()));
  std::filesystem::remove_all(dir);

  const std::string prefix = "DW_CFA_def_cfa_expression (";
  std::vector<std::string> got;
  for (const std::string& line : test::lines_of(text)) {
    auto at = line.find(prefix);
    if (at == std::string::npos) continue;
    std::string rest = line.substr(at + prefix.size());
    ASSERT_FALSE(rest.empty());
    ASSERT_EQ(rest.back(), ')');
    rest.pop_back();
    got.push_back(rest);
  }
  ASSERT_EQ(got.size(), exprs.size()) << text;
  for (size_t i = 0; i < exprs.size(); ++i)
    EXPECT_EQ(expression_text(must_decode(exprs[i])), got[i]) << "expression " << i;
}

// Walks the CIEs and FDEs of an .eh_frame and returns every DWARF expression in the CFA programs,
// in section order, with the DW_CFA opcode that carries it (0x0f, 0x10 or 0x16).
struct CfiExpression {
  uint8_t cfa_op = 0;
  Bytes bytes;
};

size_t encoded_size(uint8_t enc) {
  if (enc == 0xff) return 0;
  switch (enc & 0x07) {
  case 2:
    return 2;
  case 3:
    return 4;
  default:
    return 8;
  }
}

bool walk_cfa_program(ByteCursor c, size_t addr_size, std::vector<CfiExpression>& out) {
  while (!c.at_end() && c.ok()) {
    uint8_t op = c.u8();
    if (op & 0xc0) {
      if ((op & 0xc0) == 0x80) c.uleb(); // DW_CFA_offset
      continue;
    }
    switch (op) {
    case 0x00:
    case 0x0a:
    case 0x0b:
      break;
    case 0x01:
      c.skip(addr_size);
      break;
    case 0x02:
      c.u8();
      break;
    case 0x03:
      c.u16();
      break;
    case 0x04:
      c.u32();
      break;
    case 0x06:
    case 0x07:
    case 0x08:
    case 0x0d:
    case 0x0e:
    case 0x2e:
      c.uleb();
      break;
    case 0x13:
      c.sleb();
      break;
    case 0x05:
    case 0x09:
    case 0x0c:
    case 0x14:
    case 0x2f:
      c.uleb();
      c.uleb();
      break;
    case 0x11:
    case 0x12:
    case 0x15:
      c.uleb();
      c.sleb();
      break;
    case 0x0f:
    case 0x10:
    case 0x16: {
      if (op != 0x0f) c.uleb();
      uint64_t len = c.uleb();
      auto b = c.bytes(len);
      out.push_back({op, Bytes(b.begin(), b.end())});
      break;
    }
    default:
      return false;
    }
  }
  return c.ok();
}

bool eh_frame_expressions(std::span<const uint8_t> sec, std::vector<CfiExpression>& out) {
  struct Cie {
    bool z = false;
    uint8_t fde_enc = 0;
  };
  std::map<size_t, Cie> cies;
  ByteCursor c(sec);
  while (!c.at_end()) {
    uint64_t len = c.u32();
    if (!c.ok()) return false;
    if (len == 0) continue;
    if (len == 0xffffffff) len = c.u64();
    size_t body = c.pos();
    if (len > c.remaining()) return false;
    size_t end = body + len;
    uint32_t id = c.u32();
    if (id == 0) {
      Cie cie;
      uint8_t version = c.u8();
      std::string_view aug = c.cstring();
      if (aug.find("eh") != std::string_view::npos) c.skip(8);
      c.uleb();
      c.sleb();
      if (version == 1)
        c.u8();
      else
        c.uleb();
      size_t insns = c.pos();
      if (!aug.empty() && aug[0] == 'z') {
        cie.z = true;
        uint64_t aug_len = c.uleb();
        size_t aug_end = c.pos() + aug_len;
        for (char ch : aug.substr(1)) {
          if (ch == 'R')
            cie.fde_enc = c.u8();
          else if (ch == 'L')
            c.u8();
          else if (ch == 'P')
            c.skip(encoded_size(c.u8()));
        }
        c.seek(aug_end);
        insns = c.pos();
      }
      cies[body - 4] = cie;
      if (!walk_cfa_program(ByteCursor(sec.subspan(insns, end - insns)), 8, out)) return false;
    } else {
      auto it = cies.find(body - id);
      if (it == cies.end()) return false;
      size_t size = encoded_size(it->second.fde_enc);
      c.skip(2 * size);
      if (it->second.z) c.skip(c.uleb());
      size_t insns = c.pos();
      if (!c.ok() || insns > end) return false;
      if (!walk_cfa_program(ByteCursor(sec.subspan(insns, end - insns)), size, out)) return false;
    }
    c.seek(end);
  }
  return c.ok();
}

TEST(ExpressionToString, MatchesReadelfOnSystemLibraries) {
  if (!have_tool("readelf")) GTEST_SKIP() << "needs readelf";
  const std::vector<std::string> files = {
      "/usr/lib/x86_64-linux-gnu/libc.so.6",      "/lib64/ld-linux-x86-64.so.2",
      "/usr/lib/x86_64-linux-gnu/libmvec.so.1",   "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
      "/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/lib/x86_64-linux-gnu/libgcrypt.so.20",
  };
  if (!std::filesystem::exists(files[0])) GTEST_SKIP() << "no " << files[0];
  size_t checked = 0;
  for (const std::string& path : files) {
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path);
    auto elf = ElfFile::open(path);
    ASSERT_TRUE(elf.ok()) << elf.error().to_string();
    const Section* sec = (*elf)->find_section(".eh_frame");
    if (!sec) continue;
    auto data = (*elf)->section_data(*sec);
    ASSERT_TRUE(data.ok()) << data.error().to_string();
    std::vector<CfiExpression> exprs;
    ASSERT_TRUE(eh_frame_expressions(*data, exprs));

    // Only the file's own .eh_frame: readelf would otherwise follow debug links.
    std::string text = run(fmt::format(
        "readelf --debug-dump=no-follow-links --debug-dump=frames '{}' 2>/dev/null", path));
    std::vector<std::string> lines;
    bool in_eh_frame = false;
    for (const std::string& line : test::lines_of(text)) {
      if (line.rfind("Contents of the ", 0) == 0)
        in_eh_frame = line.rfind("Contents of the .eh_frame section", 0) == 0;
      else if (in_eh_frame && (line.find("DW_CFA_def_cfa_expression (") != std::string::npos ||
                               line.find("DW_CFA_expression: ") != std::string::npos ||
                               line.find("DW_CFA_val_expression: ") != std::string::npos))
        lines.push_back(line);
    }
    ASSERT_EQ(lines.size(), exprs.size());
    for (size_t i = 0; i < exprs.size(); ++i) {
      auto e = Expression::decode(exprs[i].bytes);
      ASSERT_TRUE(e.ok()) << e.error().to_string();
      const char* what = exprs[i].cfa_op == 0x0f   ? "DW_CFA_def_cfa_expression ("
                         : exprs[i].cfa_op == 0x10 ? "DW_CFA_expression: "
                                                   : "DW_CFA_val_expression: ";
      std::string want_suffix = "(" + expression_text(*e) + ")";
      const std::string& line = lines[i];
      EXPECT_NE(line.find(what), std::string::npos) << line;
      EXPECT_TRUE(line.size() >= want_suffix.size() &&
                  line.compare(line.size() - want_suffix.size(), want_suffix.size(), want_suffix) ==
                      0)
          << "readelf: " << line << "\nours:    " << want_suffix;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u);
}

// Failures carry their kind; without messages (the unwinder's signal-safe mode) they carry
// nothing else, so building them does not allocate.
TEST(ExpressionEval, ErrorKindsWithAndWithoutMessages) {
  FakeMemory mem;
  mem.map(0x5000, {1, 2, 3, 4, 5, 6, 7, 8});
  RegisterState regs = regs_with({{x86_64::RAX, 0x6000}});
  struct Case {
    Bytes bytes;
    ErrorKind kind;
  };
  const Case cases[] = {
      {{0x70, 0x00, 0x06}, ErrorKind::BadRead},   // breg0 0; deref: unmapped
      {{0x71, 0x00}, ErrorKind::MissingRegister}, // breg1: rdx unknown
      {{0x9c}, ErrorKind::MissingRegister},       // call_frame_cfa without a CFA
      {{0x31, 0x30, 0x1b}, ErrorKind::Other},     // 1 / 0
      {{0x1c}, ErrorKind::Other},                 // minus on an empty stack
  };
  for (const Case& c : cases) {
    Expression e = must_decode(c.bytes);
    auto loud = e.evaluate(regs, mem);
    ASSERT_FALSE(loud.ok());
    EXPECT_EQ(loud.error().kind, c.kind) << loud.error().message;
    EXPECT_FALSE(loud.error().message.empty());
    EvalLimits quiet;
    quiet.messages = false;
    auto silent = e.evaluate(regs, mem, std::nullopt, std::nullopt, quiet);
    ASSERT_FALSE(silent.ok());
    EXPECT_EQ(silent.error().kind, c.kind);
    EXPECT_TRUE(silent.error().message.empty()) << silent.error().message;
  }
}

} // namespace
} // namespace ehelf
