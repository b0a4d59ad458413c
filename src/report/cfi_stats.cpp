#include "report/cfi_stats.hpp"

#include <algorithm>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "dwarf/cfa_interpreter.hpp"
#include "dwarf/cfi_limits.hpp"
#include "dwarf/constants.hpp"
#include "model/dw_op.hpp"
#include "model/expression.hpp"
#include "model/registers.hpp"
#include "report/expression_text.hpp"

namespace ehelf {
namespace {

constexpr std::array<std::string_view, kSupportTokenCount> kTokenNames = {
    "undefined",      "same_value",    "offset",     "val_offset",     "register", "expression",
    "val_expression", "architectural", "cfa_offset", "cfa_expression", "plt",      "deref"};

constexpr unsigned bit(unsigned token) {
  return 1u << token;
}

bool is_expression_class(RuleClass c) {
  return c == RuleClass::Expression || c == RuleClass::ValExpression ||
         c == RuleClass::CfaExpression;
}

// An Error without its file name: "SECTION+0xOFF: MESSAGE".
std::string error_text(const Error& e) {
  std::string out;
  if (!e.section.empty() && e.has_offset)
    out = fmt::format("{}+{:#x}: ", e.section, e.offset);
  else if (!e.section.empty())
    out = fmt::format("{}: ", e.section);
  else if (e.has_offset)
    out = fmt::format("offset {:#x}: ", e.offset);
  out += e.message;
  return out;
}

// Register of a breg op, or -1.
int breg_register(const ExprOp& op) {
  if (op.opcode >= OP_breg0 && op.opcode <= OP_breg31) return op.opcode - OP_breg0;
  if (op.opcode == OP_bregx && op.a < 1024) return static_cast<int>(op.a);
  return -1;
}

// Per-file facts that become file counts.
struct FileFlags {
  std::array<bool, 2> expressions{};
  std::array<bool, 2> unsupported_expressions{};
  std::array<bool, 2> unsupported_rules{};
  bool error = false;
};

// A column's rule after a CIE's initial instructions (what DW_CFA_restore goes back to).
struct ColumnInit {
  uint64_t column = 0;
  RuleClass cls = RuleClass::Undefined;
  bool supported = false;
};

// The CFA register as far as counting needs it (the interpreter has the real state).
struct CfaShadow {
  int reg = -1; // -1: none, or the CFA is an expression
  bool expression = false;
};

struct CieFacts {
  std::vector<ColumnInit> columns;
  CfaShadow cfa;
  const ColumnInit* find(uint64_t column) const {
    for (const auto& c : columns)
      if (c.column == column) return &c;
    return nullptr;
  }
};

constexpr uint64_t kCfaColumn = UINT64_MAX;

class Gatherer {
public:
  Gatherer(CfiStats& s, const StatsOptions& opt, FileFlags& flags)
      : s_(s), opt_(opt), flags_(flags) {
    for (uint16_t c : opt.columns)
      if (c < tracked_.size()) tracked_[c] = true;
  }

  void section(const CfiSection& sec, const PointerBases& bases, const std::string& file);

private:
  bool token(unsigned t) const { return (opt_.supported >> t) & 1u; }
  bool tracked(uint64_t reg) const { return reg < tracked_.size() && tracked_[reg]; }

  void error(const std::string& file, std::string message) {
    s_.errors.push_back(FileError{file, std::move(message)});
    flags_.error = true;
  }
  void rule(uint64_t column, RuleClass cls, bool supported);
  bool expression_use(const CfaInstruction& in, RuleClass cls);
  void count_program(std::span<const CfaInstruction> program, const CieFacts* cie,
                     CieFacts* out_cie);

  // The module's rows so far: past cfi_limits::kMaxRowsPerModule its tables are refused, as
  // verify and compile refuse them (a 300 KB file can hold 87 million rows in small FDEs).
  uint64_t module_rows_ = 0;
  bool refused_ = false;
  CfiStats& s_;
  const StatsOptions& opt_;
  FileFlags& flags_;
  std::array<bool, 1024> tracked_{};
  std::vector<CfaShadow> stack_;
};

void Gatherer::rule(uint64_t column, RuleClass cls, bool supported) {
  bool expr = is_expression_class(cls);
  unsigned c = rule_class_index(cls);
  for (unsigned row : {kOnlySupported, kAllColumns}) {
    if (row == kOnlySupported && column != kCfaColumn && !tracked(column)) continue;
    RuleCounts& rc = s_.rules[row];
    ++rc.seen[c];
    if (expr) flags_.expressions[row] = true;
    if (!supported) {
      ++rc.unsupported[c];
      flags_.unsupported_rules[row] = true;
      if (expr) flags_.unsupported_expressions[row] = true;
    }
  }
}

// Counts one expression use; returns whether the rule is supported.
bool Gatherer::expression_use(const CfaInstruction& in, RuleClass cls) {
  unsigned use = cls == RuleClass::CfaExpression ? 0 : cls == RuleClass::Expression ? 1 : 2;
  auto e = Expression::decode(in.expression);
  if (!e) {
    ++s_.invalid_expressions;
    ExprEntry& entry = s_.expressions["(invalid expression)"];
    ++entry.uses[use];
    entry.shape = ExprShape::Invalid;
    return false;
  }
  const auto& ops = e->ops();
  for (const ExprOp& op : ops)
    ++s_.dw_ops[op.opcode];

  ExprShape shape = ExprShape::Other;
  if (cls == RuleClass::CfaExpression && ops.size() == 9 && ops[0].opcode == OP_breg0 + 7 &&
      ops[1].opcode == OP_breg0 + 16 && ops[1].a == 0 && ops[2].opcode == OP_lit0 + 15 &&
      ops[3].opcode == OP_and && (ops[4].opcode == OP_lit0 + 10 || ops[4].opcode == OP_lit0 + 11) &&
      ops[5].opcode == OP_ge && ops[6].opcode == OP_lit0 + 3 && ops[7].opcode == OP_shl &&
      ops[8].opcode == OP_plus) {
    shape = ExprShape::Plt;
  } else if ((cls == RuleClass::CfaExpression || cls == RuleClass::ValExpression) &&
             ops.size() == 2 && ops[1].opcode == OP_deref) {
    if (int r = breg_register(ops[0]); r >= 0 && tracked(static_cast<unsigned>(r)))
      shape = ExprShape::Deref;
  } else if (cls == RuleClass::Expression && ops.size() == 1) {
    if (int r = breg_register(ops[0]); r >= 0 && tracked(static_cast<unsigned>(r)))
      shape = ExprShape::Deref;
  }
  bool supported =
      token(rule_class_index(cls)) && ((shape == ExprShape::Plt && token(kSupportPlt)) ||
                                       (shape == ExprShape::Deref && token(kSupportDeref)));
  ExprEntry& entry = s_.expressions[expression_text(*e)];
  ++entry.uses[use];
  if (supported) ++entry.supported;
  if (entry.shape == ExprShape::Other) entry.shape = shape;
  return supported;
}

// Counts the instructions of a CIE (cie == nullptr; its final rules go to out_cie) or an FDE.
void Gatherer::count_program(std::span<const CfaInstruction> program, const CieFacts* cie,
                             CieFacts* out_cie) {
  CfaShadow cfa = cie ? cie->cfa : CfaShadow{};
  stack_.clear();
  auto set = [&](uint64_t column, RuleClass cls, bool supported) {
    rule(column, cls, supported);
    if (!out_cie) return;
    for (auto& c : out_cie->columns)
      if (c.column == column) {
        c.cls = cls;
        c.supported = supported;
        return;
      }
    out_cie->columns.push_back(ColumnInit{column, cls, supported});
  };
  auto simple = [&](const CfaInstruction& in, RuleClass cls) {
    set(in.reg, cls, token(rule_class_index(cls)));
  };
  auto cfa_offset = [&] {
    unsigned reg = cfa.expression || cfa.reg < 0 ? CfiStats::kUnknownCfaRegister
                                                 : static_cast<unsigned>(cfa.reg);
    ++s_.cfa_registers[std::min(reg, CfiStats::kUnknownCfaRegister)];
    bool ok = token(rule_class_index(RuleClass::CfaOffset)) &&
              reg != CfiStats::kUnknownCfaRegister && tracked(reg);
    rule(kCfaColumn, RuleClass::CfaOffset, ok);
  };

  s_.instructions += program.size();
  for (const CfaInstruction& in : program) {
    ++s_.cfa_opcodes[in.opcode];
    switch (in.opcode) {
    case dw::CFA_offset:
    case dw::CFA_offset_extended:
    case dw::CFA_offset_extended_sf:
    case dw::CFA_GNU_negative_offset_extended:
      simple(in, RuleClass::Offset);
      break;
    case dw::CFA_val_offset:
    case dw::CFA_val_offset_sf:
      simple(in, RuleClass::ValOffset);
      break;
    case dw::CFA_undefined:
      simple(in, RuleClass::Undefined);
      break;
    case dw::CFA_same_value:
      simple(in, RuleClass::SameValue);
      break;
    case dw::CFA_register:
      set(in.reg, RuleClass::Register,
          token(rule_class_index(RuleClass::Register)) && tracked(in.reg2));
      break;
    case dw::CFA_expression:
      set(in.reg, RuleClass::Expression, expression_use(in, RuleClass::Expression));
      break;
    case dw::CFA_val_expression:
      set(in.reg, RuleClass::ValExpression, expression_use(in, RuleClass::ValExpression));
      break;
    case dw::CFA_restore:
    case dw::CFA_restore_extended:
      if (const ColumnInit* init = cie ? cie->find(in.reg) : nullptr) {
        rule(in.reg, init->cls, init->supported);
      } else {
        ++s_.restores_to_unspecified;
        rule(in.reg, RuleClass::SameValue, token(rule_class_index(RuleClass::SameValue)));
        if (out_cie)
          std::erase_if(out_cie->columns, [&](const ColumnInit& c) { return c.column == in.reg; });
      }
      break;
    case dw::CFA_def_cfa:
    case dw::CFA_def_cfa_sf:
    case dw::CFA_def_cfa_register:
      cfa.reg = in.reg < 1024 ? static_cast<int>(in.reg) : -1;
      cfa.expression = false;
      cfa_offset();
      break;
    case dw::CFA_def_cfa_offset:
    case dw::CFA_def_cfa_offset_sf:
      cfa_offset();
      break;
    case dw::CFA_def_cfa_expression:
      cfa.reg = -1;
      cfa.expression = true;
      rule(kCfaColumn, RuleClass::CfaExpression, expression_use(in, RuleClass::CfaExpression));
      break;
    case dw::CFA_remember_state:
      stack_.push_back(cfa);
      break;
    case dw::CFA_restore_state:
      if (!stack_.empty()) {
        cfa = stack_.back();
        stack_.pop_back();
      }
      break;
    default:
      break; // advance_loc*, set_loc, nop, GNU_args_size, GNU_window_save
    }
  }
  if (out_cie) out_cie->cfa = cfa;
}

void Gatherer::section(const CfiSection& sec, const PointerBases& bases, const std::string& file) {
  if (sec.format == CfiFormat::EhFrame)
    ++s_.eh_frame_sections;
  else
    ++s_.debug_frame_sections;
  if (sec.error) error(file, error_text(*sec.error));

  s_.cies += sec.cies.size();
  std::vector<CieFacts> cies(sec.cies.size());
  for (size_t i = 0; i < sec.cies.size(); ++i) {
    auto prog = decode_cfa_program(sec, sec.cies[i], nullptr, bases);
    if (!prog) {
      error(file, error_text(prog.error()));
      continue;
    }
    count_program(*prog, nullptr, &cies[i]);
  }

  UnwindTable table; // the interpreter interns expressions here; nothing else is kept
  CfaInterpreter interp(table);
  uint64_t rows = 0;
  const std::function<void(const InterpretedRow&)> emit = [&rows](const InterpretedRow&) {
    ++rows;
  };
  uint64_t rejected = 0;
  std::optional<Error> first;
  for (const Fde& fde : sec.fdes) {
    ++s_.fdes;
    if (fde.pc_range == 0) ++s_.empty_fdes;
    if (fde.cie >= sec.cies.size()) continue; // the parser never produces this
    const Cie& cie = sec.cies[fde.cie];
    rows = 0;
    if (refused_) break;
    Status st = interp.run(sec, cie, fde, bases, emit);
    if (st) {
      s_.rows += rows;
      ++s_.rows_per_fde[row_bucket(rows)];
      module_rows_ += rows;
      if (module_rows_ > cfi_limits::kMaxRowsPerModule) {
        error(file, fmt::format("{}+{:#x}: more than {} rows in the module's tables: refused",
                                sec.name, fde.offset, cfi_limits::kMaxRowsPerModule));
        refused_ = true;
      }
    } else {
      ++rejected;
      if (!first) first = st.error();
    }
    // Rejected or not, count what decodes, like readelf still lists it.
    if (auto prog = decode_cfa_program(sec, cie, &fde, bases))
      count_program(*prog, &cies[fde.cie], nullptr);
  }
  if (rejected) {
    s_.fde_errors += rejected;
    std::string msg = error_text(*first);
    if (rejected > 1) msg += fmt::format(" (and {} more FDEs rejected)", rejected - 1);
    error(file, std::move(msg));
  }
}

} // namespace

// ---------------------------------------------------------------------------------------------

std::string_view rule_class_name(RuleClass c) {
  return kTokenNames[rule_class_index(c)];
}

std::string_view expr_shape_name(ExprShape s) {
  switch (s) {
  case ExprShape::Other:
    return "other";
  case ExprShape::Plt:
    return "plt";
  case ExprShape::Deref:
    return "deref";
  case ExprShape::Invalid:
    return "invalid";
  }
  return "?";
}

SupportSet StatsOptions::default_supported() {
  return bit(rule_class_index(RuleClass::Undefined)) | bit(rule_class_index(RuleClass::SameValue)) |
         bit(rule_class_index(RuleClass::Offset)) | bit(rule_class_index(RuleClass::CfaOffset)) |
         bit(rule_class_index(RuleClass::CfaExpression)) |
         bit(rule_class_index(RuleClass::Expression)) |
         bit(rule_class_index(RuleClass::ValExpression)) | bit(kSupportPlt) | bit(kSupportDeref);
}

Result<SupportSet> StatsOptions::parse_supported(std::string_view list) {
  SupportSet s = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view tok = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!tok.empty() && tok.front() == ' ')
      tok.remove_prefix(1);
    while (!tok.empty() && tok.back() == ' ')
      tok.remove_suffix(1);
    if (tok.empty()) continue;
    auto it = std::find(kTokenNames.begin(), kTokenNames.end(), tok);
    if (it == kTokenNames.end()) {
      std::string valid;
      for (auto n : kTokenNames) {
        if (!valid.empty()) valid += ", ";
        valid += n;
      }
      return Error::plain(fmt::format("unknown supported-set token '{}' (valid: {})", tok, valid));
    }
    s |= bit(static_cast<unsigned>(it - kTokenNames.begin()));
  }
  return s;
}

std::string_view support_token_name(unsigned token) {
  return token < kSupportTokenCount ? kTokenNames[token] : std::string_view();
}

std::string StatsOptions::supported_to_string(SupportSet s) {
  std::string out;
  for (unsigned t = 0; t < kSupportTokenCount; ++t)
    if (s & bit(t)) {
      if (!out.empty()) out += ',';
      out += kTokenNames[t];
    }
  return out;
}

bool StatsOptions::is_column(unsigned reg) const {
  return std::find(columns.begin(), columns.end(), reg) != columns.end();
}

uint64_t RuleCounts::rules_seen() const {
  uint64_t n = 0;
  for (uint64_t v : seen)
    n += v;
  return n;
}
uint64_t RuleCounts::rules_unsupported() const {
  uint64_t n = 0;
  for (uint64_t v : unsupported)
    n += v;
  return n;
}
uint64_t RuleCounts::expressions_seen() const {
  return seen[rule_class_index(RuleClass::Expression)] +
         seen[rule_class_index(RuleClass::ValExpression)] +
         seen[rule_class_index(RuleClass::CfaExpression)];
}
uint64_t RuleCounts::expressions_unsupported() const {
  return unsupported[rule_class_index(RuleClass::Expression)] +
         unsupported[rule_class_index(RuleClass::ValExpression)] +
         unsupported[rule_class_index(RuleClass::CfaExpression)];
}
uint64_t RuleCounts::register_rules_total() const {
  uint64_t n = 0;
  for (unsigned i = 0; i < kRegisterRuleClasses; ++i)
    n += seen[i];
  return n;
}

unsigned row_bucket(uint64_t rows) {
  if (rows <= 4) return static_cast<unsigned>(rows);
  if (rows <= 8) return 5;
  if (rows <= 16) return 6;
  if (rows <= 32) return 7;
  if (rows <= 64) return 8;
  return 9;
}

std::string_view row_bucket_name(unsigned bucket) {
  static constexpr std::array<std::string_view, kRowBuckets> names = {
      "0", "1", "2", "3", "4", "5-8", "9-16", "17-32", "33-64", ">64"};
  return bucket < names.size() ? names[bucket] : "?";
}

Result<ElfKind> classify_elf_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::plain(fmt::format("cannot open: {}", std::strerror(errno)));
  unsigned char h[20] = {};
  ssize_t n;
  do
    n = ::pread(fd, h, sizeof h, 0);
  while (n < 0 && errno == EINTR);
  int saved = errno;
  ::close(fd);
  if (n < 0) return Error::plain(fmt::format("cannot read: {}", std::strerror(saved)));
  if (n < 4 || std::memcmp(h, ELFMAG, SELFMAG) != 0) return ElfKind::NotElf;
  if (n < static_cast<ssize_t>(sizeof h)) return Error::plain("truncated ELF header");
  if (h[EI_CLASS] == ELFCLASS32) return ElfKind::Elf32;
  if (h[EI_CLASS] != ELFCLASS64)
    return Error::plain(fmt::format("invalid ELF class {}", h[EI_CLASS]));
  unsigned machine = h[18] | (h[19] << 8);
  if (h[EI_DATA] != ELFDATA2LSB || machine != EM_X86_64) return ElfKind::OtherArch;
  return ElfKind::X86_64;
}

void CfiStats::add_file(const std::string& path, const StatsOptions& opt) {
  const Result<ElfKind> kind = classify_elf_file(path);
  if (!kind) {
    ++files_failed;
    errors.push_back(FileError{path, kind.error().message});
    return;
  }
  switch (*kind) {
  case ElfKind::NotElf:
    ++files_not_elf;
    return;
  case ElfKind::Elf32:
    ++files_elf32;
    return;
  case ElfKind::OtherArch:
    ++files_other_arch;
    return;
  case ElfKind::X86_64:
    break;
  }
  LoadOptions lo;
  lo.eh_frame = opt.eh_frame;
  lo.debug_frame = opt.debug_frame;
  lo.separate_debug_file = false;
  auto m = load_module_cfi(path, lo);
  if (!m) {
    ++files_failed;
    errors.push_back(FileError{path, error_text(m.error())});
    return;
  }
  add_module(*m, opt);
}

void CfiStats::add_module(const ModuleCfi& module, const StatsOptions& opt) {
  ++files_scanned;
  FileFlags flags;
  Gatherer g(*this, opt, flags);
  const std::string& file = module.elf->name();
  bool any = false;
  if (module.eh_frame && opt.eh_frame) {
    any = true;
    g.section(*module.eh_frame, module.eh_frame_bases, file);
  }
  if (module.debug_frame && opt.debug_frame) {
    any = true;
    g.section(*module.debug_frame, module.debug_frame_bases,
              module.debug_elf ? module.debug_elf->name() : file);
  }
  if (any) ++files_with_cfi;
  for (unsigned row : {kOnlySupported, kAllColumns}) {
    files_with_expressions[row] += flags.expressions[row];
    files_with_unsupported_expressions[row] += flags.unsupported_expressions[row];
    files_with_unsupported_rules[row] += flags.unsupported_rules[row];
  }
  if (flags.error) ++files_with_errors;
}

void CfiStats::merge(const CfiStats& o) {
  auto add = [](auto& a, const auto& b) {
    for (size_t i = 0; i < a.size(); ++i)
      a[i] += b[i];
  };
  files_scanned += o.files_scanned;
  files_with_cfi += o.files_with_cfi;
  files_not_elf += o.files_not_elf;
  files_elf32 += o.files_elf32;
  files_other_arch += o.files_other_arch;
  files_failed += o.files_failed;
  files_with_errors += o.files_with_errors;
  add(files_with_expressions, o.files_with_expressions);
  add(files_with_unsupported_expressions, o.files_with_unsupported_expressions);
  add(files_with_unsupported_rules, o.files_with_unsupported_rules);
  eh_frame_sections += o.eh_frame_sections;
  debug_frame_sections += o.debug_frame_sections;
  cies += o.cies;
  fdes += o.fdes;
  empty_fdes += o.empty_fdes;
  fde_errors += o.fde_errors;
  rows += o.rows;
  add(rows_per_fde, o.rows_per_fde);
  instructions += o.instructions;
  add(cfa_opcodes, o.cfa_opcodes);
  for (unsigned row : {kOnlySupported, kAllColumns}) {
    add(rules[row].seen, o.rules[row].seen);
    add(rules[row].unsupported, o.rules[row].unsupported);
  }
  restores_to_unspecified += o.restores_to_unspecified;
  add(cfa_registers, o.cfa_registers);
  add(dw_ops, o.dw_ops);
  invalid_expressions += o.invalid_expressions;
  for (const auto& [text, e] : o.expressions) {
    ExprEntry& mine = expressions[text];
    add(mine.uses, e.uses);
    mine.supported += e.supported;
    if (mine.shape == ExprShape::Other) mine.shape = e.shape;
  }
  errors.insert(errors.end(), o.errors.begin(), o.errors.end());
}

std::vector<std::pair<std::string, ExprEntry>> CfiStats::top_expressions(size_t n) const {
  std::vector<std::pair<std::string, ExprEntry>> v(expressions.begin(), expressions.end());
  auto before = [](const auto& a, const auto& b) {
    if (a.second.total() != b.second.total()) return a.second.total() > b.second.total();
    return a.first < b.first;
  };
  n = std::min(n, v.size());
  std::partial_sort(v.begin(), v.begin() + static_cast<ptrdiff_t>(n), v.end(), before);
  v.resize(n);
  return v;
}

} // namespace ehelf
