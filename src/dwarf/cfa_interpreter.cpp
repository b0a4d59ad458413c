#include "dwarf/cfa_interpreter.hpp"

#include <algorithm>
#include <fmt/format.h>

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

Status CfaInterpreter::execute(const CfiSection& section, const Cie& cie, const Fde* fde,
                               const PointerBases& bases, uint64_t& loc, uint64_t end,
                               const std::function<void(const InterpretedRow&)>* emit) {
  auto error = [&](const CfaInstruction& in, std::string msg) -> Status {
    return Error::at(section.name, in.offset,
                     fmt::format("{}: {}", dw::cfa_name(in.opcode), std::move(msg)));
  };
  uint64_t rows = 0;
  // Moves the location, emitting the row that ends there. Rows past the FDE's end are dropped:
  // they can never be looked up.
  auto advance_to = [&](uint64_t next) {
    if (emit && next > loc && loc < end) {
      (*emit)(InterpretedRow{loc, std::min(next, end), &state_});
      ++rows;
    }
    loc = next;
  };
  ByteCursor cursor(fde ? fde->instructions : cie.instructions,
                    fde ? fde->instructions_offset : cie.instructions_offset);
  uint64_t instructions = 0;
  CfaInstruction in;
  while (!cursor.at_end()) {
    if (auto st = decode_cfa_step(section, cursor, cie, bases, in); !st) return st;
    if (++instructions > cfi_limits::kMaxInstructionsPerProgram)
      return error(in, fmt::format("more than {} instructions in one program: refused",
                                   cfi_limits::kMaxInstructionsPerProgram));
    if (in.reg > kMaxColumn)
      return error(in, fmt::format("register number {} is too large", in.reg));
    auto set = [&](RegisterRule::Kind kind, int64_t offset = 0, uint16_t reg = 0,
                   uint32_t expr = kNoExpression) {
      state_.set(static_cast<unsigned>(in.reg), RegisterRule{kind, reg, offset, expr});
    };
    // Wrapping arithmetic: hostile operands must not overflow a signed multiplication.
    int64_t factored = static_cast<int64_t>(static_cast<uint64_t>(in.operand) *
                                            static_cast<uint64_t>(cie.data_align));
    switch (in.opcode) {
    case dw::CFA_advance_loc:
    case dw::CFA_advance_loc1:
    case dw::CFA_advance_loc2:
    case dw::CFA_advance_loc4:
    case dw::CFA_MIPS_advance_loc8:
      if (fde) {
        uint64_t step = in.delta * cie.code_align;
        if (loc + step < loc) return error(in, "location overflows");
        advance_to(loc + step);
      }
      break;
    case dw::CFA_set_loc:
      if (fde) {
        if (in.address < loc)
          return error(
              in, fmt::format("moves the location backwards ({:#x} < {:#x})", in.address, loc));
        advance_to(in.address);
      }
      break;
    case dw::CFA_offset:
    case dw::CFA_offset_extended:
    case dw::CFA_offset_extended_sf:
      set(RegisterRule::Kind::Offset, factored);
      break;
    case dw::CFA_GNU_negative_offset_extended:
      set(RegisterRule::Kind::Offset, -factored);
      break;
    case dw::CFA_val_offset:
    case dw::CFA_val_offset_sf:
      set(RegisterRule::Kind::ValOffset, factored);
      break;
    case dw::CFA_restore:
    case dw::CFA_restore_extended:
      if (const RegisterRule* r = initial_.rule_for(static_cast<unsigned>(in.reg)); r && fde)
        state_.set(static_cast<unsigned>(in.reg), *r);
      else
        state_.erase(static_cast<unsigned>(in.reg));
      break;
    case dw::CFA_undefined:
      set(RegisterRule::Kind::Undefined);
      break;
    case dw::CFA_same_value:
      set(RegisterRule::Kind::SameValue);
      break;
    case dw::CFA_register:
      if (in.reg2 > kMaxColumn)
        return error(in, fmt::format("register number {} is too large", in.reg2));
      set(RegisterRule::Kind::Register, 0, static_cast<uint16_t>(in.reg2));
      break;
    case dw::CFA_remember_state:
      if (stack_.size() >= kMaxStateStack) return error(in, "state stack too deep");
      stack_.push_back(state_);
      break;
    case dw::CFA_restore_state: {
      if (stack_.empty()) return error(in, "no remembered state to restore");
      int64_t args_size = state_.args_size; // not part of the remembered state
      state_ = std::move(stack_.back());
      state_.args_size = args_size;
      stack_.pop_back();
      break;
    }
    case dw::CFA_def_cfa:
      state_.cfa = CfaRule{CfaRule::Kind::RegOffset, static_cast<uint16_t>(in.reg), in.operand,
                           kNoExpression};
      break;
    case dw::CFA_def_cfa_sf:
      state_.cfa =
          CfaRule{CfaRule::Kind::RegOffset, static_cast<uint16_t>(in.reg), factored, kNoExpression};
      break;
    case dw::CFA_def_cfa_register:
      if (state_.cfa.kind != CfaRule::Kind::RegOffset) state_.cfa.offset = 0;
      state_.cfa.kind = CfaRule::Kind::RegOffset;
      state_.cfa.reg = static_cast<uint16_t>(in.reg);
      state_.cfa.expr = kNoExpression;
      break;
    case dw::CFA_def_cfa_offset:
    case dw::CFA_def_cfa_offset_sf:
      if (state_.cfa.kind == CfaRule::Kind::Expression)
        return error(in, "the CFA is defined by an expression");
      state_.cfa.kind = CfaRule::Kind::RegOffset;
      state_.cfa.offset = in.opcode == dw::CFA_def_cfa_offset ? in.operand : factored;
      break;
    case dw::CFA_def_cfa_expression: {
      auto e = intern_expression(section, in);
      if (!e) return std::move(e).error();
      state_.cfa = CfaRule{CfaRule::Kind::Expression, 0, 0, *e};
      break;
    }
    case dw::CFA_expression:
    case dw::CFA_val_expression: {
      auto e = intern_expression(section, in);
      if (!e) return std::move(e).error();
      set(in.opcode == dw::CFA_expression ? RegisterRule::Kind::Expression
                                          : RegisterRule::Kind::ValExpression,
          0, 0, *e);
      break;
    }
    case dw::CFA_GNU_args_size:
      state_.args_size = in.operand;
      break;
    case dw::CFA_nop:
    case dw::CFA_GNU_window_save: // SPARC/AArch64 only; no x86_64 meaning
      break;
    default:
      return error(in, "unhandled instruction");
    }
    if (rows > cfi_limits::kMaxRowsPerFde)
      return error(
          in, fmt::format("more than {} rows in one FDE: refused", cfi_limits::kMaxRowsPerFde));
  }
  return Ok{};
}

} // namespace ehelf
