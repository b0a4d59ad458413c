// Expression: a decoded DWARF expression as it appears in CFI, and its bounded evaluator.
//
// Decoding turns bytes into ops once (at table build time); evaluation walks the ops with a step
// limit and a stack-depth limit and reads memory only through a MemoryReader.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/dw_op.hpp"
#include "model/memory_reader.hpp"
#include "model/register_state.hpp"
#include "support/result.hpp"

namespace ehelf {

// One operation. Operand meaning depends on the opcode:
//   const*/lit*/addr:   a = the constant (signed ones sign-extended into a)
//   breg0-31, fbreg:    a = signed offset;          bregx: a = register, b = signed offset
//   reg0-31:            none;                       regx:  a = register
//   pick, deref_size, xderef_size: a = index/size
//   plus_uconst:        a = addend
//   skip, bra:          a = signed byte displacement; b = index of the target op in ops()
//   piece:              a = size; bit_piece: a = size, b = offset
//   implicit_value:     a = length (the bytes follow in the encoding)
//   call2/call4/call_ref: a = offset
//   GNU_entry_value:    a = length of the sub-expression
struct ExprOp {
  uint8_t opcode = 0;
  uint32_t offset = 0; // byte offset of the opcode within the expression
  uint64_t a = 0;
  uint64_t b = 0;
};

struct EvalLimits {
  uint32_t max_steps = 10000; // ops executed, counting loops via bra/skip
  uint32_t max_stack = 64;
  // false: failures are Error::quiet (their kind only), so evaluating never allocates.
  bool messages = true;
};

class Expression {
public:
  Expression() = default;
  // Decodes every op; fails on unknown opcodes, truncated operands, and branch targets that are
  // not the start of an op (or the end). Error offsets are relative to the expression start.
  static Result<Expression> decode(std::span<const uint8_t> bytes, uint8_t address_size = 8);

  const std::vector<ExprOp>& ops() const { return ops_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  bool operator==(const Expression& o) const { return bytes_ == o.bytes_; }

  uint8_t address_size() const { return address_size_; }

  // Evaluates the expression. `initial` is pushed first when given (DW_CFA_expression and
  // DW_CFA_val_expression push the CFA); `cfa` serves DW_OP_call_frame_cfa. Register operands
  // (breg*, bregx) need the register valid in `regs`. Returns the top of the stack.
  // Errors: invalid register, memory read refused, stack underflow/overflow, step limit,
  // division by zero, ops not allowed in CFI (reg*, piece, call*, ...).
  Result<uint64_t> evaluate(const RegisterState& regs, MemoryReader& mem,
                            std::optional<uint64_t> initial = std::nullopt,
                            std::optional<uint64_t> cfa = std::nullopt,
                            const EvalLimits& limits = {}) const;

  // Ops decoded into fixed storage, for evaluating an expression straight from its bytes
  // without allocating (unwind rows found on demand, in signal handlers).
  struct FixedOps {
    static constexpr size_t kMaxOps = 32; // CFI expressions have a handful (the PLT rule: 9)
    ExprOp ops[kMaxOps];
    size_t count = 0;
    std::span<const ExprOp> span() const { return {ops, count}; }
  };
  // Decodes into `out`; false for more than kMaxOps ops, malformed bytes, or forms that CFI
  // expressions never hold (blocks, sub-expressions, typed constants). Never allocates.
  static bool decode_fixed(std::span<const uint8_t> bytes, FixedOps& out);
  // evaluate() over decoded ops (from decode_fixed, or ops()).
  static Result<uint64_t> evaluate_ops(std::span<const ExprOp> ops, uint8_t address_size,
                                       const RegisterState& regs, MemoryReader& mem,
                                       std::optional<uint64_t> initial, std::optional<uint64_t> cfa,
                                       const EvalLimits& limits);

private:
  std::vector<uint8_t> bytes_;
  std::vector<ExprOp> ops_;
  uint8_t address_size_ = 8;
};

} // namespace ehelf
