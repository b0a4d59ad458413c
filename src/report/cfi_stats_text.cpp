#include "report/cfi_stats_text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "dwarf/constants.hpp"
#include "model/dw_op.hpp"
#include "model/registers.hpp"

namespace ehelf {
namespace {

std::string reg_name(unsigned r) {
  auto n = x86_64::register_name(r);
  return n.empty() ? fmt::format("r{}", r) : std::string(n);
}

// Percentages the way the paper prints them: one decimal, more when needed to tell the value
// from 0 or 100 ("99.996 %", "0.006 %").
std::string percent(uint64_t part, uint64_t total) {
  if (total == 0) return "-";
  if (part == 0) return "0 %";
  if (part == total) return "100 %";
  double p = 100.0 * static_cast<double>(part) / static_cast<double>(total);
  for (int d = 1; d <= 3; ++d) {
    std::string s = fmt::format("{:.{}f}", p, d);
    double r = std::stod(s);
    if (r > 0 && r < 100) return s + " %";
  }
  return p < 50 ? "<0.001 %" : ">99.999 %";
}

double percent_value(uint64_t part, uint64_t total) {
  return total ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

// "N (x %)" as in Table 4; plain "0" for zero.
std::string count_cell(uint64_t n, uint64_t total) {
  if (n == 0) return "0";
  return fmt::format("{} ({})", n, percent(n, total));
}

// A plain text table: first column left-aligned, the others right-aligned.
class TextTable {
public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void left_align(size_t column) { left_.push_back(column); }
  std::string render() const {
    std::vector<size_t> width;
    for (const auto& r : rows_) {
      if (width.size() < r.size()) width.resize(r.size(), 0);
      for (size_t i = 0; i < r.size(); ++i)
        width[i] = std::max(width[i], r[i].size());
    }
    std::string out;
    for (const auto& r : rows_) {
      std::string line = "  ";
      for (size_t i = 0; i < r.size(); ++i) {
        bool left = i == 0 || std::find(left_.begin(), left_.end(), i) != left_.end();
        if (i) line += "  ";
        if (left && i + 1 == r.size())
          line += r[i];
        else if (left)
          line += fmt::format("{:<{}}", r[i], width[i]);
        else
          line += fmt::format("{:>{}}", r[i], width[i]);
      }
      while (!line.empty() && line.back() == ' ')
        line.pop_back();
      out += line + "\n";
    }
    return out;
  }

private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> left_;
};

constexpr std::array<std::string_view, 2> kRowNames = {"Only supp.", "All columns"};
constexpr std::array<std::string_view, 8> kTable4Names = {
    "Undefined", "Same_value", "Offset",         "Val_offset",
    "Register",  "Expression", "Val_expression", "Architectural"};

std::string cfa_register_label(unsigned reg) {
  return reg == CfiStats::kUnknownCfaRegister ? std::string("(unknown)") : reg_name(reg);
}

// Histogram entries with a count, most frequent first (ties by index).
std::vector<std::pair<unsigned, uint64_t>> sorted_histogram(std::span<const uint64_t> h) {
  std::vector<std::pair<unsigned, uint64_t>> v;
  for (unsigned i = 0; i < h.size(); ++i)
    if (h[i]) v.emplace_back(i, h[i]);
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second > b.second; });
  return v;
}

std::string cfa_opcode_label(unsigned op) {
  auto n = dw::cfa_name(static_cast<uint8_t>(op));
  return n.empty() ? fmt::format("DW_CFA_{:#04x}", op) : std::string(n);
}

std::string dw_op_label(unsigned op) {
  auto n = dw_op_name(static_cast<uint8_t>(op));
  return n.empty() ? fmt::format("DW_OP_{:#04x}", op) : std::string(n);
}

std::string supported_label(const ExprEntry& e) {
  if (e.supported == 0) return "no";
  if (e.supported == e.total()) return "yes";
  return fmt::format("{}/{}", e.supported, e.total());
}

} // namespace

// ---------------------------------------------------------------------------------------------

std::string render_stats_text(const CfiStats& s, const StatsOptions& opt, const StatsReport& r) {
  std::string out;
  std::string columns;
  for (uint16_t c : opt.columns) {
    if (!columns.empty()) columns += ", ";
    columns += reg_name(c);
  }

  out += fmt::format("Files: {} ELF64 x86_64 scanned ({} with call-frame sections); skipped {} "
                     "not ELF, {} ELF32, {} other architecture; {} failed to load, {} with CFI "
                     "errors\n",
                     s.files_scanned, s.files_with_cfi, s.files_not_elf, s.files_elf32,
                     s.files_other_arch, s.files_failed, s.files_with_errors);
  out += fmt::format("Sections: {} .eh_frame, {} .debug_frame; {} CIEs, {} FDEs ({} empty, {} "
                     "rejected), {} rows, {} instructions\n",
                     s.eh_frame_sections, s.debug_frame_sections, s.cies, s.fdes, s.empty_fdes,
                     s.fde_errors, s.rows, s.instructions);
  out += fmt::format("Supported set: {}; \"Only supp.\" columns: CFA, {}\n\n",
                     StatsOptions::supported_to_string(opt.supported), columns);

  // Table 3.
  {
    TextTable t({"", "Unsupported register rule", "Register rules seen", "% supp.",
                 "Unsupported expression", "Expressions seen", "% supp."});
    for (unsigned row : {kOnlySupported, kAllColumns}) {
      const RuleCounts& rc = s.rules[row];
      t.add({std::string(kRowNames[row]), std::to_string(rc.rules_unsupported()),
             std::to_string(rc.rules_seen()),
             percent(rc.rules_seen() - rc.rules_unsupported(), rc.rules_seen()),
             std::to_string(rc.expressions_unsupported()), std::to_string(rc.expressions_seen()),
             percent(rc.expressions_seen() - rc.expressions_unsupported(), rc.expressions_seen())});
    }
    out += "Table 3. Instructions coverage statistics (CFA rules included)\n" + t.render() + "\n";
  }
  // Table 4, in two halves like the paper.
  {
    out += "Table 4. Instruction type statistics (non-CFA columns)\n";
    for (unsigned half = 0; half < 2; ++half) {
      std::vector<std::string> header = {""};
      unsigned first = half ? 5 : 0, last = half ? 8 : 5;
      for (unsigned k = first; k < last; ++k)
        header.emplace_back(kTable4Names[k]);
      if (half) header.emplace_back("Total");
      TextTable t(header);
      for (unsigned row : {kOnlySupported, kAllColumns}) {
        const RuleCounts& rc = s.rules[row];
        uint64_t total = rc.register_rules_total();
        std::vector<std::string> cells = {std::string(kRowNames[row])};
        for (unsigned k = first; k < last; ++k)
          cells.push_back(count_cell(rc.seen[k], total));
        if (half) cells.push_back(std::to_string(total));
        t.add(std::move(cells));
      }
      out += t.render();
    }
    out += "\n";
  }
  // Files.
  {
    TextTable t({"", "With expressions", "With unsupported expression", "With unsupported rule"});
    for (unsigned row : {kOnlySupported, kAllColumns})
      t.add({std::string(kRowNames[row]), std::to_string(s.files_with_expressions[row]),
             std::to_string(s.files_with_unsupported_expressions[row]),
             std::to_string(s.files_with_unsupported_rules[row])});
    out += fmt::format("Files (of {} scanned)\n", s.files_scanned) + t.render() + "\n";
  }
  // Unsupported rules by class.
  {
    TextTable t({"Rule", "Only supp.", "unsupported", "All columns", "unsupported"});
    for (unsigned c = 0; c < kRuleClassCount; ++c) {
      const auto& a = s.rules[kOnlySupported];
      const auto& b = s.rules[kAllColumns];
      if (!a.seen[c] && !b.seen[c]) continue;
      t.add({std::string(rule_class_name(static_cast<RuleClass>(c))), std::to_string(a.seen[c]),
             std::to_string(a.unsupported[c]), std::to_string(b.seen[c]),
             std::to_string(b.unsupported[c])});
    }
    out += fmt::format("Rules by class ({} restores to a column the CIE leaves unspecified "
                       "counted as same_value)\n",
                       s.restores_to_unspecified) +
           t.render() + "\n";
  }
  // CFA rules.
  {
    const RuleCounts& rc = s.rules[kAllColumns];
    uint64_t total = rc.seen[rule_class_index(RuleClass::CfaOffset)] +
                     rc.seen[rule_class_index(RuleClass::CfaExpression)];
    TextTable t({"CFA rule", "Instructions", "%"});
    for (auto [reg, n] : sorted_histogram(s.cfa_registers))
      t.add({cfa_register_label(reg) + " + offset", std::to_string(n), percent(n, total)});
    uint64_t ne = rc.seen[rule_class_index(RuleClass::CfaExpression)];
    if (ne) t.add({"expression", std::to_string(ne), percent(ne, total)});
    out += "CFA rules\n" + t.render() + "\n";
  }
  // DW_CFA opcodes.
  {
    TextTable t({"Opcode", "Count", "%"});
    for (auto [op, n] : sorted_histogram(s.cfa_opcodes))
      t.add({cfa_opcode_label(op), std::to_string(n), percent(n, s.instructions)});
    out += fmt::format("DW_CFA opcodes ({} instructions)\n", s.instructions) + t.render() + "\n";
  }
  // DW_OP operations.
  {
    uint64_t total = 0;
    for (uint64_t v : s.dw_ops)
      total += v;
    TextTable t({"Operation", "Count", "%"});
    for (auto [op, n] : sorted_histogram(s.dw_ops))
      t.add({dw_op_label(op), std::to_string(n), percent(n, total)});
    out += fmt::format("DW_OP operations ({} in {} expression uses)\n", total,
                       s.rules[kAllColumns].expressions_seen()) +
           t.render() + "\n";
  }
  // Common expressions.
  {
    TextTable t({"Uses", "CFA", "Expr", "Val_expr", "Shape", "Supported", "Expression"});
    t.left_align(4);
    t.left_align(5);
    t.left_align(6);
    for (const auto& [text, e] : s.top_expressions(r.top))
      t.add({std::to_string(e.total()), std::to_string(e.uses[0]), std::to_string(e.uses[1]),
             std::to_string(e.uses[2]), std::string(expr_shape_name(e.shape)), supported_label(e),
             text});
    out += fmt::format("Most common expressions (top {} of {} distinct)\n",
                       std::min(r.top, s.expressions.size()), s.expressions.size()) +
           t.render() + "\n";
  }
  // Rows per FDE.
  {
    uint64_t counted = 0;
    for (uint64_t v : s.rows_per_fde)
      counted += v;
    TextTable t({"Rows", "FDEs", "%"});
    for (unsigned b = 0; b < kRowBuckets; ++b)
      t.add({std::string(row_bucket_name(b)), std::to_string(s.rows_per_fde[b]),
             percent(s.rows_per_fde[b], counted)});
    out += fmt::format("Rows per FDE ({} FDEs, {} rows)\n", counted, s.rows) + t.render() + "\n";
  }
  // Errors.
  if (!s.errors.empty()) {
    std::vector<FileError> errors = s.errors;
    std::sort(errors.begin(), errors.end());
    out += fmt::format("Errors ({})\n", errors.size());
    for (const auto& e : errors)
      out += fmt::format("  {}: {}\n", e.file, e.message);
    out += "\n";
  }
  if (r.seconds >= 0)
    out += fmt::format("Time: {:.2f} s ({} files read, {} thread{})\n", r.seconds,
                       s.files_scanned + s.files_not_elf + s.files_elf32 + s.files_other_arch +
                           s.files_failed,
                       r.threads, r.threads == 1 ? "" : "s");
  return out;
}

nlohmann::json stats_to_json(const CfiStats& s, const StatsOptions& opt, const StatsReport& r) {
  using nlohmann::json;
  // Objects start as json::object(), not as a null promoted by operator[] (see section_json in
  // table_json.cpp: out of memory there is a segfault with nlohmann::json 3.11.2).
  json j = json::object();
  j["files"] = {{"scanned", s.files_scanned},        {"with_cfi", s.files_with_cfi},
                {"not_elf", s.files_not_elf},        {"elf32", s.files_elf32},
                {"other_arch", s.files_other_arch},  {"failed", s.files_failed},
                {"with_errors", s.files_with_errors}};
  json supported = json::array();
  for (unsigned t = 0; t < kSupportTokenCount; ++t)
    if (opt.supported & (1u << t)) supported.push_back(std::string(support_token_name(t)));
  j["supported"] = supported;
  json columns = json::array();
  for (uint16_t c : opt.columns)
    columns.push_back(reg_name(c));
  j["columns"] = columns;
  j["eh_frame_sections"] = s.eh_frame_sections;
  j["debug_frame_sections"] = s.debug_frame_sections;
  j["cies"] = s.cies;
  j["fdes"] = s.fdes;
  j["empty_fdes"] = s.empty_fdes;
  j["rejected_fdes"] = s.fde_errors;
  j["rows"] = s.rows;
  j["instructions"] = s.instructions;
  j["restores_to_unspecified"] = s.restores_to_unspecified;

  static const std::array<std::string, 2> keys = {"only_supported", "all_columns"};
  json t3 = json::object(), t4 = json::object(), classes = json::object(),
       files_with = json::object();
  for (unsigned row : {kOnlySupported, kAllColumns}) {
    const RuleCounts& rc = s.rules[row];
    t3[keys[row]] = {{"unsupported_register_rules", rc.rules_unsupported()},
                     {"register_rules_seen", rc.rules_seen()},
                     {"percent_supported",
                      percent_value(rc.rules_seen() - rc.rules_unsupported(), rc.rules_seen())},
                     {"unsupported_expressions", rc.expressions_unsupported()},
                     {"expressions_seen", rc.expressions_seen()},
                     {"percent_expressions_supported",
                      percent_value(rc.expressions_seen() - rc.expressions_unsupported(),
                                    rc.expressions_seen())}};
    json k4 = json::object(), kc = json::object();
    for (unsigned c = 0; c < kRegisterRuleClasses; ++c)
      k4[std::string(rule_class_name(static_cast<RuleClass>(c)))] = rc.seen[c];
    k4["total"] = rc.register_rules_total();
    t4[keys[row]] = k4;
    for (unsigned c = 0; c < kRuleClassCount; ++c)
      kc[std::string(rule_class_name(static_cast<RuleClass>(c)))] = {
          {"seen", rc.seen[c]}, {"unsupported", rc.unsupported[c]}};
    classes[keys[row]] = kc;
    files_with[keys[row]] = {{"expressions", s.files_with_expressions[row]},
                             {"unsupported_expressions", s.files_with_unsupported_expressions[row]},
                             {"unsupported_rules", s.files_with_unsupported_rules[row]}};
  }
  j["table3"] = t3;
  j["table4"] = t4;
  j["rule_classes"] = classes;
  j["files_with"] = files_with;

  json cfa = json::object();
  for (auto [reg, n] : sorted_histogram(s.cfa_registers))
    cfa[cfa_register_label(reg)] = n;
  j["cfa_rules"] = {
      {"reg_offset", cfa},
      {"expression", s.rules[kAllColumns].seen[rule_class_index(RuleClass::CfaExpression)]}};

  json ops = json::object();
  for (auto [op, n] : sorted_histogram(s.cfa_opcodes))
    ops[cfa_opcode_label(op)] = n;
  j["cfa_opcodes"] = ops;
  json dwops = json::object();
  for (auto [op, n] : sorted_histogram(s.dw_ops))
    dwops[dw_op_label(op)] = n;
  j["dw_ops"] = dwops;
  j["invalid_expressions"] = s.invalid_expressions;
  j["distinct_expressions"] = s.expressions.size();
  json exprs = json::array();
  for (const auto& [text, e] : s.top_expressions(r.top))
    exprs.push_back({{"expression", text},
                     {"uses", e.total()},
                     {"def_cfa_expression", e.uses[0]},
                     {"expression_rule", e.uses[1]},
                     {"val_expression", e.uses[2]},
                     {"shape", std::string(expr_shape_name(e.shape))},
                     {"supported_uses", e.supported}});
  j["top_expressions"] = exprs;

  json buckets = json::object();
  for (unsigned b = 0; b < kRowBuckets; ++b)
    buckets[std::string(row_bucket_name(b))] = s.rows_per_fde[b];
  j["rows_per_fde"] = buckets;

  std::vector<FileError> errors = s.errors;
  std::sort(errors.begin(), errors.end());
  json errs = json::array();
  for (const auto& e : errors)
    errs.push_back({{"file", e.file}, {"message", e.message}});
  j["errors"] = errs;
  if (r.seconds >= 0) {
    j["seconds"] = r.seconds;
    j["threads"] = r.threads;
  }
  return j;
}

} // namespace ehelf
