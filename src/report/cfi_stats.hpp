// CfiStats: what call-frame instructions real ELF files use — the data behind Tables 3 and 4 of
// Bastian, Kell and Zappa Nardelli, "Reliable and Fast DWARF-Based Stack Unwinding" (section 3.2,
// "Instruction Coverage"), plus the histograms those tables summarise.
//
// One CfiStats accumulates any number of modules (add_file / add_module) and can be merged with
// another (merge), so files can be scanned by several threads, each into its own CfiStats.
//
// ---- Counting convention (what one "register rule seen" is) ----
// Every DW_CFA instruction that sets the rule of a column counts once, where it is encoded: a
// CIE's initial instructions count once per CIE (not once per FDE using it), exactly like
// `readelf --debug-dump=frames` lists them. The class of the rule set is:
//   DW_CFA_offset, offset_extended, offset_extended_sf, GNU_negative_offset_extended -> offset
//   DW_CFA_val_offset, val_offset_sf                                             -> val_offset
//   DW_CFA_undefined -> undefined;  DW_CFA_same_value -> same_value;  DW_CFA_register -> register
//   DW_CFA_expression -> expression;  DW_CFA_val_expression -> val_expression
//   DW_CFA_restore, restore_extended -> the class of the rule the CIE's initial instructions give
//       that column (with that rule's supportedness); when the CIE gives the column no rule (and
//       for a restore inside a CIE), same_value: the column goes back to "no rule", which x86_64
//       unwinders treat as same value. These are also counted in `restores_to_unspecified`.
//   DW_CFA_def_cfa, def_cfa_sf, def_cfa_register, def_cfa_offset, def_cfa_offset_sf
//       -> cfa_offset (CFA = reg + offset), filed under the CFA register in force after the
//          instruction (def_cfa_offset keeps the current one, remember/restore_state included)
//   DW_CFA_def_cfa_expression -> cfa_expression
// Not rule-setting, so not counted as rules (they are in the opcode histogram): advance_loc*,
// set_loc, nop, remember_state, restore_state (a state pop, not a new rule), GNU_args_size,
// GNU_window_save. No x86_64 instruction produces an `architectural` rule; its count stays 0.
//
// ---- Rows of Tables 3 and 4 ----
// "Only supp." counts the columns eh_elfs tracks (StatsOptions::columns: rip, rsp, rbp, rbx) plus
// the CFA; "All columns" counts every column plus the CFA. Table 3 ("register rules seen")
// includes the CFA rules, as the paper's text says ("the columns CFA, rip, rsp, rbp and rbx");
// Table 4 ("instructions used to update non-CFA columns") excludes them. The CFA rules are broken
// down in their own table (by CFA register, and expressions).
//
// ---- Supported set (Table 3's "% supp.") ----
// A set of tokens (StatsOptions::supported, `--supported=a,b,...`):
//   rule classes: undefined same_value offset val_offset register expression val_expression
//                 architectural cfa_offset cfa_expression
//   expression shapes: plt    the PLT CFA expression: DW_OP_breg7 (rsp): K; DW_OP_breg16 (rip): 0;
//                             DW_OP_lit15; DW_OP_and; DW_OP_lit10|11; DW_OP_ge; DW_OP_lit3;
//                             DW_OP_shl; DW_OP_plus (as a def_cfa_expression)
//                      deref  a value loaded from a tracked register plus a constant, *(reg + K):
//                             "DW_OP_bregN: K; DW_OP_deref" as a def_cfa_expression or
//                             val_expression, or "DW_OP_bregN: K" as an expression rule (the
//                             register is saved at reg + K), e.g. CFA = *(rbp - 8) after stack
//                             realignment
// A rule is supported when its class is in the set and:
//   cfa_offset: the CFA register is one of `columns` (eh_elfs only knows those registers);
//   register:   the source register is one of `columns`;
//   expression, val_expression, cfa_expression: the expression has a shape that is in the set
//       (an undecodable expression is never supported).
// The default, modelled on eh_elfs (Offset rules and CFA = reg + offset over rip/rsp/rbp/rbx, the
// two common expressions, and undefined/same_value, which only mark a register as absent or
// unchanged — undefined rip ends the stack):
//   undefined,same_value,offset,expression,val_expression,cfa_offset,cfa_expression,plt,deref
// "Unsupported register rule" counts every unsupported rule, expression rules included;
// "unsupported expression" counts the expression rules among them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "dwarf/module_cfi.hpp"
#include "support/result.hpp"

namespace ehelf {

// The class of a rule set by one instruction: the eight RegisterRule kinds (same order and
// values), then the two CFA rule kinds.
enum class RuleClass : uint8_t {
  Undefined,
  SameValue,
  Offset,
  ValOffset,
  Register,
  Expression,
  ValExpression,
  Architectural,
  CfaOffset,     // CFA = reg + offset
  CfaExpression, // CFA = expression
};
constexpr unsigned kRuleClassCount = 10;
constexpr unsigned kRegisterRuleClasses = 8;   // the non-CFA ones (Table 4's columns)
std::string_view rule_class_name(RuleClass c); // "undefined", ..., "cfa_offset", "cfa_expression"

// Tokens of the supported set: the rule classes (bit = class), then the expression shapes.
enum SupportToken : unsigned { kSupportPlt = kRuleClassCount, kSupportDeref, kSupportTokenCount };
using SupportSet = uint32_t;                         // bit i = token i
std::string_view support_token_name(unsigned token); // "undefined", ..., "plt", "deref"
constexpr unsigned rule_class_index(RuleClass c) {
  return static_cast<unsigned>(c);
}

// The shape of an expression, for the supported set.
enum class ExprShape : uint8_t { Other, Plt, Deref, Invalid };
std::string_view expr_shape_name(ExprShape s); // "other", "plt", "deref", "invalid"

struct StatsOptions {
  SupportSet supported = default_supported();
  // The columns of the "Only supp." row, and the registers a supported rule may read.
  std::vector<uint16_t> columns = {16 /*rip*/, 7 /*rsp*/, 6 /*rbp*/, 3 /*rbx*/};
  bool eh_frame = true;
  bool debug_frame = true;

  static SupportSet default_supported();
  // "offset,cfa_offset,plt" -> set; unknown tokens are an error naming the valid ones.
  static Result<SupportSet> parse_supported(std::string_view list);
  static std::string supported_to_string(SupportSet s); // comma-separated, token order
  bool is_column(unsigned reg) const;
};

// Rules seen in one row of Tables 3/4.
struct RuleCounts {
  std::array<uint64_t, kRuleClassCount> seen{};
  std::array<uint64_t, kRuleClassCount> unsupported{};

  uint64_t rules_seen() const; // Table 3: every class, CFA included
  uint64_t rules_unsupported() const;
  uint64_t expressions_seen() const; // expression + val_expression + cfa_expression
  uint64_t expressions_unsupported() const;
  uint64_t register_rules_total() const; // Table 4's Total: the 8 non-CFA classes
  bool operator==(const RuleCounts&) const = default;
};

// One distinct expression (by readelf text) and where it was used.
struct ExprEntry {
  std::array<uint64_t, 3> uses{}; // as def_cfa_expression, expression, val_expression
  uint64_t supported = 0;         // uses that were supported
  ExprShape shape = ExprShape::Other;
  uint64_t total() const { return uses[0] + uses[1] + uses[2]; }
  bool operator==(const ExprEntry&) const = default;
};

struct FileError {
  std::string file;
  std::string message;
  bool operator==(const FileError&) const = default;
  auto operator<=>(const FileError&) const = default;
};

// Rows per FDE buckets: 0, 1, 2, 3, 4, 5-8, 9-16, 17-32, 33-64, >64.
constexpr unsigned kRowBuckets = 10;
unsigned row_bucket(uint64_t rows);
std::string_view row_bucket_name(unsigned bucket);

enum StatsRow : unsigned { kOnlySupported = 0, kAllColumns = 1 };

// How a file looks from its ELF header.
enum class ElfKind { NotElf, Elf32, OtherArch, X86_64 };
// Reads the first bytes of `path`; an error when it cannot be opened or read, or its header is
// an ELF header that is truncated or of no valid class.
Result<ElfKind> classify_elf_file(const std::string& path);

struct CfiStats {
  // ---- files ----
  uint64_t files_scanned = 0;     // ELF64 x86_64 files whose CFI was read
  uint64_t files_with_cfi = 0;    // of those, with .eh_frame or .debug_frame
  uint64_t files_not_elf = 0;     // skipped silently
  uint64_t files_elf32 = 0;       // skipped
  uint64_t files_other_arch = 0;  // ELF64 but not little-endian x86_64; skipped
  uint64_t files_failed = 0;      // unreadable, or the ELF/CFI could not be loaded (in errors)
  uint64_t files_with_errors = 0; // scanned, but part of the CFI is malformed (in errors)
  // Per row (kOnlySupported, kAllColumns): files with any expression rule, with an unsupported
  // expression, with any unsupported rule.
  std::array<uint64_t, 2> files_with_expressions{};
  std::array<uint64_t, 2> files_with_unsupported_expressions{};
  std::array<uint64_t, 2> files_with_unsupported_rules{};

  // ---- entries ----
  uint64_t eh_frame_sections = 0;
  uint64_t debug_frame_sections = 0;
  uint64_t cies = 0;
  uint64_t fdes = 0;
  uint64_t empty_fdes = 0; // pc_range == 0
  uint64_t fde_errors = 0; // FDEs the interpreter rejected (not in rows or rows_per_fde)
  uint64_t rows = 0;       // rows with a non-empty address range, as the interpreter emits them
  std::array<uint64_t, kRowBuckets> rows_per_fde{};

  // ---- instructions ----
  uint64_t instructions = 0;
  std::array<uint64_t, 256> cfa_opcodes{}; // by opcode; primary ones at 0x40/0x80/0xc0
  std::array<RuleCounts, 2> rules{};       // [kOnlySupported], [kAllColumns]
  uint64_t restores_to_unspecified = 0;
  // CFA = reg + offset rules by CFA register; the last slot is "unknown" (def_cfa_offset with
  // no CFA register in force).
  static constexpr unsigned kUnknownCfaRegister = 1024;
  std::array<uint64_t, kUnknownCfaRegister + 1> cfa_registers{};

  // ---- expressions ----
  std::array<uint64_t, 256> dw_ops{}; // DW_OP histogram over every expression use
  uint64_t invalid_expressions = 0;   // uses whose bytes do not decode
  std::unordered_map<std::string, ExprEntry> expressions; // readelf text -> uses

  std::vector<FileError> errors;

  // Classifies `path` and, for an ELF64 x86_64 file, loads and adds its CFI (no separate debug
  // files). Never fails: problems are counted and listed in `errors`.
  void add_file(const std::string& path, const StatsOptions& opt);
  // Adds one loaded module (counts it as scanned).
  void add_module(const ModuleCfi& module, const StatsOptions& opt);
  void merge(const CfiStats& other);
  bool operator==(const CfiStats&) const = default;

  // The `n` most used expressions, most used first (ties by text).
  std::vector<std::pair<std::string, ExprEntry>> top_expressions(size_t n) const;
};

} // namespace ehelf
