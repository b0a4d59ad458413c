#include "compile/c_expression.hpp"

#include <fmt/format.h>
#include <vector>

#include "model/dw_op.hpp"

namespace ehelf {
namespace {

constexpr size_t kMaxStack = 64; // the interpreter's EvalLimits::max_stack

std::string literal(uint64_t v) {
  return fmt::format("UINT64_C({:#x})", v);
}

} // namespace

std::optional<CExpression> translate_expression(const Expression& e, int (*slot_of)(unsigned),
                                                const char* initial, const char* cfa, int& temp,
                                                OnFailure on_failure) {
  const char* need = on_failure == OnFailure::FailStep ? "NEED" : "NEED_OR_BREAK";
  const char* read = on_failure == OnFailure::FailStep ? "READ" : "READ_OR_BREAK";
  CExpression out;
  std::vector<std::string> stack;
  // Every stack value becomes a named temporary: values are used more than once (dup, over)
  // and the C stays linear in the expression's size.
  auto push = [&](const std::string& expr) {
    std::string name = fmt::format("e{}", temp++);
    out.statements += fmt::format("uint64_t {} = {}; ", name, expr);
    stack.push_back(name);
    return stack.size() <= kMaxStack;
  };
  auto breg = [&](unsigned reg, uint64_t offset) {
    int slot = slot_of(reg);
    if (slot < 0) return false;
    out.statements += fmt::format("{}({}); ", need, slot);
    return push(fmt::format("R({}) + {}", slot, literal(offset)));
  };
  if (initial && !push(initial)) return std::nullopt;
  for (const ExprOp& op : e.ops()) {
    uint8_t c = op.opcode;
    bool ok = true;
    if (c >= OP_lit0 && c <= OP_lit31)
      ok = push(literal(c - OP_lit0));
    else if (c >= OP_breg0 && c <= OP_breg31)
      ok = breg(c - OP_breg0, op.a);
    else {
      switch (c) {
      case OP_addr:
      case OP_const1u:
      case OP_const1s:
      case OP_const2u:
      case OP_const2s:
      case OP_const4u:
      case OP_const4s:
      case OP_const8u:
      case OP_const8s:
      case OP_constu:
      case OP_consts:
        ok = push(literal(op.a));
        break;
      case OP_bregx:
        ok = op.a < 64 && breg(static_cast<unsigned>(op.a), op.b);
        break;
      case OP_call_frame_cfa:
        ok = cfa && push(cfa);
        break;
      case OP_nop:
        break;
      case OP_dup:
        ok = !stack.empty() && push(stack.back());
        break;
      case OP_drop:
        ok = !stack.empty();
        if (ok) stack.pop_back();
        break;
      case OP_over:
        ok = stack.size() >= 2 && push(stack[stack.size() - 2]);
        break;
      case OP_pick:
        ok = op.a < stack.size() && push(stack[stack.size() - 1 - op.a]);
        break;
      case OP_swap:
        ok = stack.size() >= 2;
        if (ok) std::swap(stack[stack.size() - 1], stack[stack.size() - 2]);
        break;
      case OP_rot:
        ok = stack.size() >= 3;
        if (ok) {
          size_t n = stack.size();
          std::string top = stack[n - 1];
          stack[n - 1] = stack[n - 2];
          stack[n - 2] = stack[n - 3];
          stack[n - 3] = top;
        }
        break;
      case OP_deref: {
        ok = !stack.empty();
        if (!ok) break;
        std::string addr = stack.back();
        stack.pop_back();
        std::string name = fmt::format("e{}", temp++);
        out.statements += fmt::format("uint64_t {}; {}({}, {}); ", name, read, addr, name);
        stack.push_back(name);
        break;
      }
      case OP_abs:
      case OP_neg:
      case OP_not:
      case OP_plus_uconst: {
        ok = !stack.empty();
        if (!ok) break;
        std::string a = stack.back();
        stack.pop_back();
        if (c == OP_abs)
          ok = push(fmt::format("((int64_t){0} < 0 ? 0 - {0} : {0})", a));
        else if (c == OP_neg)
          ok = push(fmt::format("(0 - {})", a));
        else if (c == OP_not)
          ok = push(fmt::format("(~{})", a));
        else
          ok = push(fmt::format("({} + {})", a, literal(op.a)));
        break;
      }
      case OP_and:
      case OP_minus:
      case OP_mul:
      case OP_or:
      case OP_plus:
      case OP_shl:
      case OP_shr:
      case OP_shra:
      case OP_xor:
      case OP_eq:
      case OP_ge:
      case OP_gt:
      case OP_le:
      case OP_lt:
      case OP_ne: {
        ok = stack.size() >= 2;
        if (!ok) break;
        std::string b = stack.back(); // top
        stack.pop_back();
        std::string a = stack.back(); // second: the result is `a OP b`
        stack.pop_back();
        std::string r;
        switch (c) {
        case OP_and:
          r = fmt::format("({} & {})", a, b);
          break;
        case OP_minus:
          r = fmt::format("({} - {})", a, b);
          break;
        case OP_mul:
          r = fmt::format("({} * {})", a, b);
          break;
        case OP_or:
          r = fmt::format("({} | {})", a, b);
          break;
        case OP_plus:
          r = fmt::format("({} + {})", a, b);
          break;
        case OP_xor:
          r = fmt::format("({} ^ {})", a, b);
          break;
        // Shifts of 64 or more: the interpreter's defined results, not C's undefined behaviour.
        case OP_shl:
          r = fmt::format("({1} >= 64 ? 0 : {0} << {1})", a, b);
          break;
        case OP_shr:
          r = fmt::format("({1} >= 64 ? 0 : {0} >> {1})", a, b);
          break;
        case OP_shra:
          r = fmt::format("({1} >= 64 ? (uint64_t)((int64_t){0} >> 63) : "
                          "(uint64_t)((int64_t){0} >> {1}))",
                          a, b);
          break;
        case OP_eq:
          r = fmt::format("(uint64_t)((int64_t){} == (int64_t){})", a, b);
          break;
        case OP_ge:
          r = fmt::format("(uint64_t)((int64_t){} >= (int64_t){})", a, b);
          break;
        case OP_gt:
          r = fmt::format("(uint64_t)((int64_t){} > (int64_t){})", a, b);
          break;
        case OP_le:
          r = fmt::format("(uint64_t)((int64_t){} <= (int64_t){})", a, b);
          break;
        case OP_lt:
          r = fmt::format("(uint64_t)((int64_t){} < (int64_t){})", a, b);
          break;
        case OP_ne:
          r = fmt::format("(uint64_t)((int64_t){} != (int64_t){})", a, b);
          break;
        default:
          break;
        }
        ok = push(r);
        break;
      }
      default:
        ok = false; // branches, division, sized or typed derefs, locations...
      }
    }
    if (!ok) return std::nullopt;
  }
  if (stack.empty()) return std::nullopt;
  out.value = stack.back();
  return out;
}

} // namespace ehelf
