#include "report/cfi_stats.hpp"

#include <algorithm>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "dwarf/cfa_interpreter.hpp"
#include "dwarf/constants.hpp"
#include "model/expression.hpp"
#include "model/registers.hpp"

namespace ehelf {
namespace {

// The DW_OP values the shape matcher looks at.
enum : uint8_t {
  OP_deref = 0x06,
  OP_and = 0x1a,
  OP_plus = 0x22,
  OP_shl = 0x24,
  OP_ge = 0x2a,
  OP_lit0 = 0x30,
  OP_breg0 = 0x70,
  OP_breg31 = 0x8f,
  OP_bregx = 0x92,
};

constexpr std::array<std::string_view, kSupportTokenCount> kTokenNames = {
    "undefined",  "same_value",    "offset",     "val_offset",     "register", "expression",
    "val_expression", "architectural", "cfa_offset", "cfa_expression", "plt", "deref"};

constexpr unsigned bit(unsigned token) { return 1u << token; }
constexpr unsigned cls_index(RuleClass c) { return static_cast<unsigned>(c); }

bool is_expression_class(RuleClass c) {
  return c == RuleClass::Expression || c == RuleClass::ValExpression ||
         c == RuleClass::CfaExpression;
}

std::string reg_name(unsigned r) {
  auto n = x86_64::register_name(r);
  return n.empty() ? fmt::format("r{}", r) : std::string(n);
}

// An Error without its file name: "SECTION+0xOFF: MESSAGE".
std::string error_text(const Error& e) {
  std::string out;
  if (!e.section.empty() && e.has_offset) out = fmt::format("{}+{:#x}: ", e.section, e.offset);
  else if (!e.section.empty()) out = fmt::format("{}: ", e.section);
  else if (e.has_offset) out = fmt::format("offset {:#x}: ", e.offset);
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

  CfiStats& s_;
  const StatsOptions& opt_;
  FileFlags& flags_;
  std::array<bool, 1024> tracked_{};
  std::vector<CfaShadow> stack_;
};

void Gatherer::rule(uint64_t column, RuleClass cls, bool supported) {
  bool expr = is_expression_class(cls);
  unsigned c = cls_index(cls);
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
  for (const ExprOp& op : ops) ++s_.dw_ops[op.opcode];

  ExprShape shape = ExprShape::Other;
  if (cls == RuleClass::CfaExpression && ops.size() == 9 && ops[0].opcode == OP_breg0 + 7 &&
      ops[1].opcode == OP_breg0 + 16 && ops[1].a == 0 && ops[2].opcode == OP_lit0 + 15 &&
      ops[3].opcode == OP_and &&
      (ops[4].opcode == OP_lit0 + 10 || ops[4].opcode == OP_lit0 + 11) &&
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
  bool supported = token(cls_index(cls)) && ((shape == ExprShape::Plt && token(kSupportPlt)) ||
                                             (shape == ExprShape::Deref && token(kSupportDeref)));
  ExprEntry& entry = s_.expressions[e->to_string()];
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
    set(in.reg, cls, token(cls_index(cls)));
  };
  auto cfa_offset = [&] {
    unsigned reg = cfa.expression || cfa.reg < 0 ? CfiStats::kUnknownCfaRegister
                                                 : static_cast<unsigned>(cfa.reg);
    ++s_.cfa_registers[std::min(reg, CfiStats::kUnknownCfaRegister)];
    bool ok = token(cls_index(RuleClass::CfaOffset)) && reg != CfiStats::kUnknownCfaRegister &&
              tracked(reg);
    rule(kCfaColumn, RuleClass::CfaOffset, ok);
  };

  s_.instructions += program.size();
  for (const CfaInstruction& in : program) {
    ++s_.cfa_opcodes[in.opcode];
    switch (in.opcode) {
    case dw::CFA_offset:
    case dw::CFA_offset_extended:
    case dw::CFA_offset_extended_sf:
    case dw::CFA_GNU_negative_offset_extended: simple(in, RuleClass::Offset); break;
    case dw::CFA_val_offset:
    case dw::CFA_val_offset_sf: simple(in, RuleClass::ValOffset); break;
    case dw::CFA_undefined: simple(in, RuleClass::Undefined); break;
    case dw::CFA_same_value: simple(in, RuleClass::SameValue); break;
    case dw::CFA_register:
      set(in.reg, RuleClass::Register,
          token(cls_index(RuleClass::Register)) && tracked(in.reg2));
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
        rule(in.reg, RuleClass::SameValue, token(cls_index(RuleClass::SameValue)));
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
    case dw::CFA_def_cfa_offset_sf: cfa_offset(); break;
    case dw::CFA_def_cfa_expression:
      cfa.reg = -1;
      cfa.expression = true;
      rule(kCfaColumn, RuleClass::CfaExpression,
           expression_use(in, RuleClass::CfaExpression));
      break;
    case dw::CFA_remember_state: stack_.push_back(cfa); break;
    case dw::CFA_restore_state:
      if (!stack_.empty()) {
        cfa = stack_.back();
        stack_.pop_back();
      }
      break;
    default: break; // advance_loc*, set_loc, nop, GNU_args_size, GNU_window_save
    }
  }
  if (out_cie) out_cie->cfa = cfa;
}

void Gatherer::section(const CfiSection& sec, const PointerBases& bases, const std::string& file) {
  if (sec.format == CfiFormat::EhFrame) ++s_.eh_frame_sections;
  else ++s_.debug_frame_sections;
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
    if (Status st = interp.run(sec, cie, fde, bases, emit)) {
      s_.rows += rows;
      ++s_.rows_per_fde[row_bucket(rows)];
      count_program(interp.last_fde_program(), &cies[fde.cie], nullptr);
    } else {
      ++rejected;
      if (!first) first = st.error();
      // Still count what decodes, like readelf still lists it.
      if (auto prog = decode_cfa_program(sec, cie, &fde, bases))
        count_program(*prog, &cies[fde.cie], nullptr);
    }
  }
  if (rejected) {
    s_.fde_errors += rejected;
    std::string msg = error_text(*first);
    if (rejected > 1) msg += fmt::format(" (and {} more FDEs rejected)", rejected - 1);
    error(file, std::move(msg));
  }
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
      for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    }
    std::string out;
    for (const auto& r : rows_) {
      std::string line = "  ";
      for (size_t i = 0; i < r.size(); ++i) {
        bool left = i == 0 || std::find(left_.begin(), left_.end(), i) != left_.end();
        if (i) line += "  ";
        if (left && i + 1 == r.size()) line += r[i];
        else if (left) line += fmt::format("{:<{}}", r[i], width[i]);
        else line += fmt::format("{:>{}}", r[i], width[i]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
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
    "Undefined",  "Same_value",     "Offset",        "Val_offset",
    "Register",   "Expression",     "Val_expression", "Architectural"};

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

std::string_view rule_class_name(RuleClass c) { return kTokenNames[cls_index(c)]; }

std::string_view expr_shape_name(ExprShape s) {
  switch (s) {
  case ExprShape::Other: return "other";
  case ExprShape::Plt: return "plt";
  case ExprShape::Deref: return "deref";
  case ExprShape::Invalid: return "invalid";
  }
  return "?";
}

SupportSet StatsOptions::default_supported() {
  return bit(cls_index(RuleClass::Undefined)) | bit(cls_index(RuleClass::SameValue)) |
         bit(cls_index(RuleClass::Offset)) | bit(cls_index(RuleClass::CfaOffset)) |
         bit(cls_index(RuleClass::CfaExpression)) | bit(cls_index(RuleClass::Expression)) |
         bit(cls_index(RuleClass::ValExpression)) | bit(kSupportPlt) | bit(kSupportDeref);
}

Result<SupportSet> StatsOptions::parse_supported(std::string_view list) {
  SupportSet s = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view tok = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!tok.empty() && tok.front() == ' ') tok.remove_prefix(1);
    while (!tok.empty() && tok.back() == ' ') tok.remove_suffix(1);
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
  for (uint64_t v : seen) n += v;
  return n;
}
uint64_t RuleCounts::rules_unsupported() const {
  uint64_t n = 0;
  for (uint64_t v : unsupported) n += v;
  return n;
}
uint64_t RuleCounts::expressions_seen() const {
  return seen[cls_index(RuleClass::Expression)] + seen[cls_index(RuleClass::ValExpression)] +
         seen[cls_index(RuleClass::CfaExpression)];
}
uint64_t RuleCounts::expressions_unsupported() const {
  return unsupported[cls_index(RuleClass::Expression)] +
         unsupported[cls_index(RuleClass::ValExpression)] +
         unsupported[cls_index(RuleClass::CfaExpression)];
}
uint64_t RuleCounts::register_rules_total() const {
  uint64_t n = 0;
  for (unsigned i = 0; i < kRegisterRuleClasses; ++i) n += seen[i];
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

ElfKind classify_elf_file(const std::string& path, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error) *error = fmt::format("cannot open: {}", std::strerror(errno));
    return ElfKind::Unreadable;
  }
  unsigned char h[20] = {};
  ssize_t n;
  do n = ::pread(fd, h, sizeof h, 0);
  while (n < 0 && errno == EINTR);
  int saved = errno;
  ::close(fd);
  if (n < 0) {
    if (error) *error = fmt::format("cannot read: {}", std::strerror(saved));
    return ElfKind::Unreadable;
  }
  if (n < 4 || std::memcmp(h, ELFMAG, SELFMAG) != 0) return ElfKind::NotElf;
  if (n < static_cast<ssize_t>(sizeof h)) {
    if (error) *error = "truncated ELF header";
    return ElfKind::Unreadable;
  }
  if (h[EI_CLASS] == ELFCLASS32) return ElfKind::Elf32;
  if (h[EI_CLASS] != ELFCLASS64) {
    if (error) *error = fmt::format("invalid ELF class {}", h[EI_CLASS]);
    return ElfKind::Unreadable;
  }
  unsigned machine = h[18] | (h[19] << 8);
  if (h[EI_DATA] != ELFDATA2LSB || machine != EM_X86_64) return ElfKind::OtherArch;
  return ElfKind::X86_64;
}

void CfiStats::add_file(const std::string& path, const StatsOptions& opt) {
  std::string err;
  switch (classify_elf_file(path, &err)) {
  case ElfKind::NotElf: ++files_not_elf; return;
  case ElfKind::Elf32: ++files_elf32; return;
  case ElfKind::OtherArch: ++files_other_arch; return;
  case ElfKind::Unreadable:
    ++files_failed;
    errors.push_back(FileError{path, std::move(err)});
    return;
  case ElfKind::X86_64: break;
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
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
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
             percent(rc.expressions_seen() - rc.expressions_unsupported(),
                     rc.expressions_seen())});
    }
    out += "Table 3. Instructions coverage statistics (CFA rules included)\n" + t.render() + "\n";
  }
  // Table 4, in two halves like the paper.
  {
    out += "Table 4. Instruction type statistics (non-CFA columns)\n";
    for (unsigned half = 0; half < 2; ++half) {
      std::vector<std::string> header = {""};
      unsigned first = half ? 5 : 0, last = half ? 8 : 5;
      for (unsigned k = first; k < last; ++k) header.emplace_back(kTable4Names[k]);
      if (half) header.emplace_back("Total");
      TextTable t(header);
      for (unsigned row : {kOnlySupported, kAllColumns}) {
        const RuleCounts& rc = s.rules[row];
        uint64_t total = rc.register_rules_total();
        std::vector<std::string> cells = {std::string(kRowNames[row])};
        for (unsigned k = first; k < last; ++k) cells.push_back(count_cell(rc.seen[k], total));
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
    uint64_t total = rc.seen[cls_index(RuleClass::CfaOffset)] +
                     rc.seen[cls_index(RuleClass::CfaExpression)];
    TextTable t({"CFA rule", "Instructions", "%"});
    for (auto [reg, n] : sorted_histogram(s.cfa_registers))
      t.add({cfa_register_label(reg) + " + offset", std::to_string(n), percent(n, total)});
    uint64_t ne = rc.seen[cls_index(RuleClass::CfaExpression)];
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
    for (uint64_t v : s.dw_ops) total += v;
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
    for (uint64_t v : s.rows_per_fde) counted += v;
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
    for (const auto& e : errors) out += fmt::format("  {}: {}\n", e.file, e.message);
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
  json j;
  j["files"] = {{"scanned", s.files_scanned},       {"with_cfi", s.files_with_cfi},
                {"not_elf", s.files_not_elf},       {"elf32", s.files_elf32},
                {"other_arch", s.files_other_arch}, {"failed", s.files_failed},
                {"with_errors", s.files_with_errors}};
  json supported = json::array();
  for (unsigned t = 0; t < kSupportTokenCount; ++t)
    if (opt.supported & bit(t)) supported.push_back(std::string(kTokenNames[t]));
  j["supported"] = supported;
  json columns = json::array();
  for (uint16_t c : opt.columns) columns.push_back(reg_name(c));
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
  json t3, t4, classes, files_with;
  for (unsigned row : {kOnlySupported, kAllColumns}) {
    const RuleCounts& rc = s.rules[row];
    t3[keys[row]] = {
        {"unsupported_register_rules", rc.rules_unsupported()},
        {"register_rules_seen", rc.rules_seen()},
        {"percent_supported", percent_value(rc.rules_seen() - rc.rules_unsupported(),
                                            rc.rules_seen())},
        {"unsupported_expressions", rc.expressions_unsupported()},
        {"expressions_seen", rc.expressions_seen()},
        {"percent_expressions_supported",
         percent_value(rc.expressions_seen() - rc.expressions_unsupported(),
                       rc.expressions_seen())}};
    json k4, kc;
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
  for (auto [reg, n] : sorted_histogram(s.cfa_registers)) cfa[cfa_register_label(reg)] = n;
  j["cfa_rules"] = {{"reg_offset", cfa},
                    {"expression", s.rules[kAllColumns].seen[cls_index(RuleClass::CfaExpression)]}};

  json ops = json::object();
  for (auto [op, n] : sorted_histogram(s.cfa_opcodes)) ops[cfa_opcode_label(op)] = n;
  j["cfa_opcodes"] = ops;
  json dwops = json::object();
  for (auto [op, n] : sorted_histogram(s.dw_ops)) dwops[dw_op_label(op)] = n;
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
  for (const auto& e : errors) errs.push_back({{"file", e.file}, {"message", e.message}});
  j["errors"] = errs;
  if (r.seconds >= 0) {
    j["seconds"] = r.seconds;
    j["threads"] = r.threads;
  }
  return j;
}

} // namespace ehelf
