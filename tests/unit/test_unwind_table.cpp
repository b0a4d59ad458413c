// The model itself: UnwindTable's building (interning, joining, clipping overlaps) and
// evaluate_row, case by case, on a synthetic register state and memory where every rule kind
// gives a different answer (the model had no direct unit test before this one).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "model/unwind_table.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

// Memory of 8-byte words at chosen addresses; any other read fails.
class Words final : public MemoryReader {
public:
  std::map<uint64_t, uint64_t> words;
  bool read(uint64_t addr, void* out, size_t size) override {
    auto it = words.find(addr);
    if (it == words.end() || size > 8) return false;
    std::memcpy(out, &it->second, size);
    return true;
  }
};

constexpr uint64_t kRsp = 0x7000, kRbp = 0x7100;

RegisterState callee() {
  RegisterState r;
  for (unsigned i = 0; i < x86_64::kGeneralRegs; ++i)
    r.set(i, 0x1000 + i); // distinct values
  r.set(x86_64::RSP, kRsp);
  r.set(x86_64::RBP, kRbp);
  r.set(x86_64::RIP, 0x401000);
  return r;
}

RegisterRule rule(RegisterRule::Kind k, int64_t offset = 0, uint16_t reg = 0,
                  uint32_t expr = kNoExpression) {
  return RegisterRule{k, reg, offset, expr};
}

CfaRule rsp_plus(int64_t off) {
  return CfaRule{CfaRule::Kind::RegOffset, x86_64::RSP, off, kNoExpression};
}

// One row in a fresh table, evaluated on callee() over `mem`.
Result<RowStep> step(UnwindTable& t, CfaRule cfa, std::vector<ColumnRule> columns, Words& mem,
                     uint16_t return_column = x86_64::RIP) {
  const uint32_t row = t.intern_row(cfa, columns);
  return t.evaluate(row, callee(), mem, return_column);
}

struct Case {
  const char* name;
  RegisterRule rbx_rule;
  bool known;
  uint64_t value; // rbx's value in the caller, when known
};

TEST(UnwindTable, EveryRegisterRuleKind) {
  // CFA = rsp + 16 = 0x7010; return address at CFA - 8; saved words around the CFA.
  Words mem;
  mem.words = {{0x7008, 0x402000}, {0x7000, 0xaaaa}, {0x6ff8, 0xbbbb}};
  const Case cases[] = {
      {"undefined", rule(RegisterRule::Kind::Undefined), false, 0},
      {"same value", rule(RegisterRule::Kind::SameValue), true, 0x1000 + x86_64::RBX},
      {"offset(-16)", rule(RegisterRule::Kind::Offset, -16), true, 0xaaaa},
      {"offset, unreadable: unknown", rule(RegisterRule::Kind::Offset, 64), false, 0},
      {"val_offset(-24)", rule(RegisterRule::Kind::ValOffset, -24), true, 0x6ff8},
      {"register(r12)", rule(RegisterRule::Kind::Register, 0, x86_64::R12), true,
       0x1000 + x86_64::R12},
      {"architectural: unknown", rule(RegisterRule::Kind::Architectural), false, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    UnwindTable t;
    auto s =
        step(t, rsp_plus(16),
             {{x86_64::RBX, c.rbx_rule}, {x86_64::RIP, rule(RegisterRule::Kind::Offset, -8)}}, mem);
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ(s->cfa, 0x7010u);
    EXPECT_EQ(s->caller.get(x86_64::RIP), 0x402000u);
    EXPECT_EQ(s->caller.get(x86_64::RSP), 0x7010u); // no rsp rule: the CFA
    EXPECT_EQ(s->caller.has(x86_64::RBX), c.known);
    if (c.known) {
      EXPECT_EQ(s->caller.get(x86_64::RBX), c.value);
    }
    // Registers without a rule keep their value.
    EXPECT_EQ(s->caller.get(x86_64::R13), 0x1000u + x86_64::R13);
  }
}

TEST(UnwindTable, ExpressionsForTheCfaAndForRegisters) {
  Words mem;
  mem.words = {{kRbp - 8, 0x7200}, {0x7200 - 8, 0x403000}, {0x7200 - 16, 0xcccc}};
  UnwindTable t;
  // DRAP: CFA = *(rbp - 8); rip at CFA - 8 by DW_CFA_expression (breg7 is not used: the CFA
  // comes first on the stack), rbx's value = CFA - 16 by DW_CFA_val_expression.
  const uint32_t cfa_expr = t.add_expression(EHELF_OK(Expression::decode(
      std::vector<uint8_t>{0x76, 0x78, 0x06}))); // DW_OP_breg6 (rbp): -8; DW_OP_deref
  const uint32_t at_cfa_minus_8 = t.add_expression(
      EHELF_OK(Expression::decode(std::vector<uint8_t>{0x09, 0xf8, 0x22}))); // const1s -8; plus
  const uint32_t cfa_minus_16 =
      t.add_expression(EHELF_OK(Expression::decode(std::vector<uint8_t>{0x09, 0xf0, 0x22})));
  auto s = step(t, CfaRule{CfaRule::Kind::Expression, 0, 0, cfa_expr},
                {{x86_64::RBX, rule(RegisterRule::Kind::ValExpression, 0, 0, cfa_minus_16)},
                 {x86_64::RIP, rule(RegisterRule::Kind::Expression, 0, 0, at_cfa_minus_8)}},
                mem);
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(s->cfa, 0x7200u);
  EXPECT_EQ(s->caller.get(x86_64::RIP), 0x403000u);
  EXPECT_EQ(s->caller.get(x86_64::RBX), 0x7200u - 16);
}

TEST(UnwindTable, WhatFailsAStepAndWhatOnlyLosesARegister) {
  Words mem; // nothing readable
  UnwindTable t;
  // The return address unreadable: the step fails as a bad read.
  auto bad = step(t, rsp_plus(16), {{x86_64::RIP, rule(RegisterRule::Kind::Offset, -8)}}, mem);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::BadRead);
  // The CFA register unknown: missing register.
  RegisterState no_rbp = callee();
  no_rbp.clear(x86_64::RBP);
  const uint32_t row = t.intern_row(
      CfaRule{CfaRule::Kind::RegOffset, x86_64::RBP, 16, kNoExpression}, std::vector<ColumnRule>{});
  auto missing = t.evaluate(row, no_rbp, mem);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::MissingRegister);
  // No CFA rule at all.
  auto undefined = step(t, CfaRule{}, {}, mem);
  EXPECT_FALSE(undefined);
  // No rule for the return address: the caller's rip is unknown (the outermost frame).
  mem.words = {{0x7008, 0x402000}};
  auto end = step(t, rsp_plus(16), {}, mem);
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->caller.has(x86_64::RIP));
  // A return column other than rip: the caller's rip is that column's value.
  auto other = step(t, rsp_plus(16), {{x86_64::R14, rule(RegisterRule::Kind::Offset, -8)}}, mem,
                    x86_64::R14);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->caller.get(x86_64::RIP), 0x402000u);
  // Evaluation without messages never carries one (signal handlers).
  auto quiet = t.evaluate(
      t.intern_row(rsp_plus(16),
                   std::vector<ColumnRule>{{x86_64::RIP, rule(RegisterRule::Kind::Offset, 64)}}),
      callee(), mem, x86_64::RIP, /*messages=*/false);
  ASSERT_FALSE(quiet);
  EXPECT_TRUE(quiet.error().message.empty());
}

// Where the caller's registers were read from (SaveSlots, for unw_get_save_loc): a register
// read at CFA + offset or at an expression's address is there; one without a rule stays where
// the callee's was; rsp (the CFA) and registers given a value or made unknown are in no slot.
TEST(UnwindTable, SaveSlotsFollowTheRules) {
  Words mem;
  mem.words = {{0x7008, 0x402000}, {0x7000, 0xaaaa}, {0x7200, 0xdddd}};
  UnwindTable t;
  const uint32_t at_7200 = t.add_expression(
      EHELF_OK(Expression::decode(std::vector<uint8_t>{0x0a, 0x00, 0x72}))); // const2u
  const uint32_t row = t.intern_row(
      rsp_plus(16),
      std::vector<ColumnRule>{{x86_64::RBX, rule(RegisterRule::Kind::Offset, -16)},
                              {x86_64::RBP, rule(RegisterRule::Kind::Undefined)},
                              {x86_64::R12, rule(RegisterRule::Kind::ValOffset, -24)},
                              {x86_64::R13, rule(RegisterRule::Kind::Expression, 0, 0, at_7200)},
                              {x86_64::R14, rule(RegisterRule::Kind::SameValue)},
                              {x86_64::RIP, rule(RegisterRule::Kind::Offset, -8)}});
  SaveSlots saved;
  for (unsigned r = 0; r < x86_64::kGeneralRegs; ++r)
    saved.set(r, 0x9000 + 8 * r); // the callee's: a context
  auto s = t.evaluate(row, callee(), mem, x86_64::RIP, true, &saved);
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(saved.address[x86_64::RBX], 0x7000u);
  EXPECT_EQ(saved.address[x86_64::R13], 0x7200u);
  EXPECT_EQ(saved.address[x86_64::RIP], 0x7008u);
  EXPECT_TRUE(saved.has(x86_64::RBX) && saved.has(x86_64::R13) && saved.has(x86_64::RIP));
  EXPECT_FALSE(saved.has(x86_64::RBP)); // undefined
  EXPECT_FALSE(saved.has(x86_64::R12)); // a value (CFA - 24), held nowhere
  EXPECT_FALSE(saved.has(x86_64::RSP)); // the CFA
  EXPECT_EQ(saved.address[x86_64::R14], 0x9000u + 8 * x86_64::R14); // same value: kept
  EXPECT_EQ(saved.address[x86_64::R15], 0x9000u + 8 * x86_64::R15); // no rule: kept
  // A failing step leaves them unchanged.
  SaveSlots before = saved;
  Words nothing;
  EXPECT_FALSE(t.evaluate(row, callee(), nothing, x86_64::RIP, false, &saved));
  EXPECT_EQ(saved.valid, before.valid);
  EXPECT_EQ(saved.address, before.address);
}

TEST(UnwindTable, RowsAreInternedAndRangesJoinedAndClipped) {
  UnwindTable t;
  const std::vector<ColumnRule> ra{{x86_64::RIP, rule(RegisterRule::Kind::Offset, -8)}};
  const uint32_t a = t.intern_row(rsp_plus(8), ra), b = t.intern_row(rsp_plus(16), ra);
  EXPECT_EQ(t.intern_row(rsp_plus(8), ra), a); // same row, same index
  EXPECT_NE(a, b);
  EXPECT_EQ(t.row_count(), 2u);
  FunctionInfo fn{0x1000, 0x1100};
  const uint32_t f = t.add_function(fn);
  t.add_range(TableRange{0x1010, 0x1020, a, f, 0}); // out of order on purpose
  t.add_range(TableRange{0x1000, 0x1010, a, f, 0}); // joins with the one above
  t.add_range(TableRange{0x1020, 0x1040, b, f, 0});
  t.add_range(TableRange{0x1030, 0x1050, a, f, 0}); // overlaps: the earlier one wins
  t.finish();
  ASSERT_EQ(t.ranges().size(), 3u);
  EXPECT_EQ(t.ranges()[0].begin, 0x1000u);
  EXPECT_EQ(t.ranges()[0].end, 0x1020u);
  EXPECT_EQ(t.ranges()[1].row, b);
  EXPECT_EQ(t.ranges()[2].begin, 0x1040u); // clipped
  EXPECT_EQ(t.overlaps(), 1u);
  EXPECT_EQ(t.find(0x1025)->row, b);
  EXPECT_EQ(t.find(0x1050), nullptr);
  EXPECT_EQ(t.find(0xfff), nullptr);
}

} // namespace
} // namespace ehelf
