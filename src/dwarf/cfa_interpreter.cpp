#include "dwarf/cfa_interpreter.hpp"

#include "dwarf/cfa_program.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <optional>

#include "dwarf/cfi_limits.hpp"
#include "dwarf/constants.hpp"

namespace ehelf {

const RegisterRule* CfaState::rule_for(unsigned column) const {
  for (const auto& c : columns)
    if (c.column == column) return &c.rule;
  return nullptr;
}

void CfaState::set(unsigned column, const RegisterRule& rule) {
  auto it = std::lower_bound(columns.begin(), columns.end(), column,
                             [](const ColumnRule& c, unsigned col) { return c.column < col; });
  if (it != columns.end() && it->column == column)
    it->rule = rule;
  else
    columns.insert(it, ColumnRule{static_cast<uint16_t>(column), rule});
}

void CfaState::erase(unsigned column) {
  std::erase_if(columns, [column](const ColumnRule& c) { return c.column == column; });
}

Result<uint32_t> CfaInterpreter::intern_expression(const CfiSection& section,
                                                   const CfaInstruction& in) {
  if (auto it = expression_cache_.find(in.expression.data()); it != expression_cache_.end())
    return it->second;
  auto e = Expression::decode(in.expression);
  if (!e) {
    Error err = std::move(e).error();
    return Error::at(
        section.name, in.offset,
        fmt::format("bad DWARF expression in {}: {}", dw::cfa_name(in.opcode), err.message));
  }
  uint32_t idx = table_.add_expression(std::move(*e));
  expression_cache_.emplace(in.expression.data(), idx);
  return idx;
}

Status CfaInterpreter::run(const CfiSection& section, const Cie& cie, const Fde& fde,
                           const PointerBases& bases,
                           const std::function<void(const InterpretedRow&)>& emit) {
  if (cached_cie_ != &cie) {
    cached_cie_ = nullptr;
    state_ = CfaState{};
    stack_.clear();
    uint64_t loc = fde.pc_begin;
    if (auto st = execute(section, cie, nullptr, bases, loc, fde.pc_end(), nullptr); !st) return st;
    initial_ = state_;
    cached_cie_ = &cie;
  }
  state_ = initial_;
  stack_.clear();
  uint64_t loc = fde.pc_begin;
  if (auto st = execute(section, cie, &fde, bases, loc, fde.pc_end(), &emit); !st) return st;
  if (loc < fde.pc_end()) emit(InterpretedRow{loc, fde.pc_end(), &state_});
  return Ok{};
}

namespace {

// The growable storage of apply_cfa_instruction's rules: the interpreter's state, every row
// emitted as the location moves. `Intern` decodes an expression into the table.
template <class Intern> struct TableRules {
  CfaState& state;
  const CfaState& initial;
  std::vector<CfaState>& stack;
  uint64_t& loc;
  const uint64_t end;
  const std::function<void(const InterpretedRow&)>* emit;
  Intern& intern;
  // Why intern failed (made only then: a table build makes this storage for every CIE and FDE).
  std::optional<Error> expression_error;
  uint64_t rows = 0;

  uint64_t location() const { return loc; }
  // Moves the location, emitting the row that ends there. Rows past the FDE's end are dropped:
  // they can never be looked up.
  CfaFault advance_to(uint64_t next) {
    if (emit && next > loc && loc < end) {
      (*emit)(InterpretedRow{loc, std::min(next, end), &state});
      if (++rows > cfi_limits::kMaxRowsPerFde) return CfaFault::TooManyRows;
    }
    loc = next;
    return CfaFault::None;
  }
  CfaFault set(unsigned column, RegisterRule::Kind kind, int64_t offset, unsigned reg,
               const CfaInstruction& in) {
    uint32_t expr = kNoExpression;
    if (kind == RegisterRule::Kind::Expression || kind == RegisterRule::Kind::ValExpression) {
      auto e = intern(in);
      if (!e) {
        expression_error = std::move(e).error();
        return CfaFault::BadExpression;
      }
      expr = *e;
    }
    state.set(column, RegisterRule{kind, static_cast<uint16_t>(reg), offset, expr});
    return CfaFault::None;
  }
  void restore(unsigned column, bool in_fde) {
    if (const RegisterRule* r = initial.rule_for(column); r && in_fde)
      state.set(column, *r);
    else
      state.erase(column);
  }
  CfaFault remember() {
    if (stack.size() >= CfaInterpreter::kMaxStateStack) return CfaFault::RememberedTooDeep;
    stack.push_back(state);
    return CfaFault::None;
  }
  CfaFault restore_state() {
    if (stack.empty()) return CfaFault::NothingRemembered;
    int64_t args_size = state.args_size; // not part of the remembered state
    state = std::move(stack.back());
    state.args_size = args_size;
    stack.pop_back();
    return CfaFault::None;
  }
  CfaFault def_cfa(unsigned reg, int64_t offset) {
    state.cfa =
        CfaRule{CfaRule::Kind::RegOffset, static_cast<uint16_t>(reg), offset, kNoExpression};
    return CfaFault::None;
  }
  void def_cfa_register(unsigned reg) {
    if (state.cfa.kind != CfaRule::Kind::RegOffset) state.cfa.offset = 0;
    state.cfa.kind = CfaRule::Kind::RegOffset;
    state.cfa.reg = static_cast<uint16_t>(reg);
    state.cfa.expr = kNoExpression;
  }
  bool cfa_is_expression() const { return state.cfa.kind == CfaRule::Kind::Expression; }
  CfaFault def_cfa_offset(int64_t offset) {
    state.cfa.kind = CfaRule::Kind::RegOffset;
    state.cfa.offset = offset;
    return CfaFault::None;
  }
  CfaFault def_cfa_expression(const CfaInstruction& in) {
    auto e = intern(in);
    if (!e) {
      expression_error = std::move(e).error();
      return CfaFault::BadExpression;
    }
    state.cfa = CfaRule{CfaRule::Kind::Expression, 0, 0, *e};
    return CfaFault::None;
  }
  void args_size(int64_t size) { state.args_size = size; }
};

} // namespace

Status CfaInterpreter::execute(const CfiSection& section, const Cie& cie, const Fde* fde,
                               const PointerBases& bases, uint64_t& loc, uint64_t end,
                               const std::function<void(const InterpretedRow&)>* emit) {
  auto intern = [&](const CfaInstruction& in) { return intern_expression(section, in); };
  TableRules<decltype(intern)> rules{state_, initial_, stack_, loc, end, emit, intern};
  const CfaFactors factors{cie.code_align, cie.data_align};
  ByteCursor cursor(fde ? fde->instructions : cie.instructions,
                    fde ? fde->instructions_offset : cie.instructions_offset);
  uint64_t instructions = 0;
  CfaInstruction in;
  while (!cursor.at_end()) {
    if (auto st = decode_cfa_step(section, cursor, cie, bases, in); !st) return st;
    auto error = [&](std::string msg) -> Status {
      return Error::at(section.name, in.offset,
                       fmt::format("{}: {}", dw::cfa_name(in.opcode), std::move(msg)));
    };
    if (++instructions > cfi_limits::kMaxInstructionsPerProgram)
      return error(fmt::format("more than {} instructions in one program: refused",
                               cfi_limits::kMaxInstructionsPerProgram));
    switch (apply_cfa_instruction(in, factors, fde != nullptr, rules)) {
    case CfaFault::None:
    case CfaFault::Stopped:
      break;
    case CfaFault::LocationOverflows:
      return error("location overflows");
    case CfaFault::LocationBackwards:
      return error(fmt::format("moves the location backwards ({:#x} < {:#x})", in.address, loc));
    case CfaFault::RegisterTooLarge:
      return error(fmt::format("register number {} is too large",
                               in.reg > kMaxCfaColumn ? in.reg : in.reg2));
    case CfaFault::NothingRemembered:
      return error("no remembered state to restore");
    case CfaFault::CfaIsExpression:
      return error("the CFA is defined by an expression");
    case CfaFault::Unhandled:
      return error("unhandled instruction");
    case CfaFault::RememberedTooDeep:
      return error("state stack too deep");
    case CfaFault::TooManyRows:
      return error(
          fmt::format("more than {} rows in one FDE: refused", cfi_limits::kMaxRowsPerFde));
    case CfaFault::BadExpression:
      return std::move(*rules.expression_error);
    case CfaFault::BeyondStorage: // (only fixed storage has values it cannot hold)
      return error("a value this interpreter cannot hold");
    }
  }
  return Ok{};
}

} // namespace ehelf
