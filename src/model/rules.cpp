#include "model/rules.hpp"

namespace ehelf {

std::string_view rule_kind_name(RegisterRule::Kind k) {
  switch (k) {
  case RegisterRule::Kind::Undefined: return "undefined";
  case RegisterRule::Kind::SameValue: return "same_value";
  case RegisterRule::Kind::Offset: return "offset";
  case RegisterRule::Kind::ValOffset: return "val_offset";
  case RegisterRule::Kind::Register: return "register";
  case RegisterRule::Kind::Expression: return "expression";
  case RegisterRule::Kind::ValExpression: return "val_expression";
  case RegisterRule::Kind::Architectural: return "architectural";
  }
  return "?";
}

} // namespace ehelf
