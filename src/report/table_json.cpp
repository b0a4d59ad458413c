#include "report/table_json.hpp"

#include <fmt/format.h>

#include "dwarf/cfa_interpreter.hpp"
#include "model/registers.hpp"
#include "report/expression_text.hpp"

namespace ehelf {
namespace {

std::string reg_name(unsigned r) {
  auto n = x86_64::register_name(r);
  return n.empty() ? fmt::format("r{}", r) : std::string(n);
}

nlohmann::json section_json(const CfiSection& s, const PointerBases& bases, UnwindTable& exprs,
                            Status& status) {
  // Every object starts as one (json::object()), never as a null that operator[] turns into an
  // object: nlohmann::json 3.11.2 sets the type before allocating the map, so when memory runs
  // out there, the value is left an object without a map and its destructor dereferences null
  // (a segfault instead of bad_alloc's "out of memory"); later releases check for it.
  nlohmann::json sec = nlohmann::json::object();
  sec["name"] = s.name;
  sec["address"] = s.address;
  nlohmann::json entries = nlohmann::json::array();
  CfaInterpreter interp(exprs);
  for (const CfiEntry& e : s.entries) {
    nlohmann::json j = nlohmann::json::object();
    j["offset"] = e.offset;
    if (e.kind == CfiEntry::Kind::Terminator) {
      j["type"] = "terminator";
    } else if (e.kind == CfiEntry::Kind::Cie) {
      const Cie& c = s.cies[e.index];
      j["type"] = "CIE";
      j["version"] = c.version;
      j["augmentation"] = std::string(c.augmentation);
      j["code_alignment"] = c.code_align;
      j["data_alignment"] = c.data_align;
      j["return_address_register"] = c.ra_register;
      if (c.personality_encoding != 0xff) j["personality"] = c.personality;
      j["signal_frame"] = c.signal_frame;
    } else {
      const Fde& f = s.fdes[e.index];
      j["type"] = "FDE";
      j["cie"] = s.cies[f.cie].offset;
      j["pc_begin"] = f.pc_begin;
      j["pc_end"] = f.pc_end();
      if (f.has_lsda) j["lsda"] = f.lsda;
      nlohmann::json rows = nlohmann::json::array();
      auto st = interp.run(s, s.cies[f.cie], f, bases, [&](const InterpretedRow& r) {
        nlohmann::json row = nlohmann::json::object();
        row["loc"] = r.begin;
        row["end"] = r.end;
        row["cfa"] = r.state->cfa.kind == CfaRule::Kind::Expression
                         ? expression_text(exprs.expression(r.state->cfa.expr))
                         : cfa_rule_text(r.state->cfa);
        nlohmann::json regs = nlohmann::json::object();
        for (const auto& c : r.state->columns) {
          const RegisterRule& rule = c.rule;
          bool is_expr = rule.kind == RegisterRule::Kind::Expression ||
                         rule.kind == RegisterRule::Kind::ValExpression;
          regs[reg_name(c.column)] =
              is_expr ? fmt::format("{}({})",
                                    rule.kind == RegisterRule::Kind::Expression ? "exp" : "vexp",
                                    expression_text(exprs.expression(rule.expr)))
                      : register_rule_text(rule);
        }
        row["registers"] = std::move(regs);
        if (r.state->args_size) row["args_size"] = r.state->args_size;
        rows.push_back(std::move(row));
      });
      if (!st && status) status = std::move(st);
      j["rows"] = std::move(rows);
    }
    entries.push_back(std::move(j));
  }
  sec["entries"] = std::move(entries);
  if (s.error) sec["error"] = s.error->to_string();
  return sec;
}

} // namespace

std::string cfa_rule_text(const CfaRule& rule) {
  switch (rule.kind) {
  case CfaRule::Kind::RegOffset:
    return fmt::format("{}{:+d}", reg_name(rule.reg), rule.offset);
  case CfaRule::Kind::Expression:
    return "exp";
  case CfaRule::Kind::Undefined:
    return "u";
  }
  return "?";
}

std::string register_rule_text(const RegisterRule& rule) {
  switch (rule.kind) {
  case RegisterRule::Kind::Undefined:
    return "u";
  case RegisterRule::Kind::SameValue:
    return "s";
  case RegisterRule::Kind::Offset:
    return fmt::format("c{:+d}", rule.offset);
  case RegisterRule::Kind::ValOffset:
    return fmt::format("v{:+d}", rule.offset);
  case RegisterRule::Kind::Register:
    return reg_name(rule.reg);
  case RegisterRule::Kind::Expression:
    return "exp";
  case RegisterRule::Kind::ValExpression:
    return "vexp";
  case RegisterRule::Kind::Architectural:
    return "a";
  }
  return "?";
}

Result<nlohmann::json> cfi_to_json(const ModuleCfi& module) {
  nlohmann::json out = nlohmann::json::object();
  out["file"] = module.elf->name();
  nlohmann::json sections = nlohmann::json::array();
  UnwindTable exprs; // expression pool for rendering
  Status status = Ok{};
  if (module.eh_frame)
    sections.push_back(section_json(*module.eh_frame, module.eh_frame_bases, exprs, status));
  if (module.debug_frame)
    sections.push_back(section_json(*module.debug_frame, module.debug_frame_bases, exprs, status));
  out["sections"] = std::move(sections);
  if (module.eh_frame_hdr) {
    nlohmann::json hdr = nlohmann::json::object();
    hdr["version"] = module.eh_frame_hdr->version;
    hdr["eh_frame_ptr"] = module.eh_frame_hdr->eh_frame_ptr;
    hdr["fde_count"] = module.eh_frame_hdr->fde_count;
    hdr["problems"] = module.eh_frame_hdr_problems;
    out["eh_frame_hdr"] = std::move(hdr);
  } else if (module.eh_frame_hdr_error) {
    out["eh_frame_hdr"] = {{"error", module.eh_frame_hdr_error->to_string()}};
  }
  if (auto e = module.first_error()) return *e;
  if (!status) return std::move(status).error().in_file(module.elf->name());
  return out;
}

} // namespace ehelf
