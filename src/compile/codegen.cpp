#include "compile/codegen.hpp"

#include <fmt/format.h>
#include <unordered_map>
#include <vector>

#include "compile/c_expression.hpp"
#include "ehelf/eh_elf.h"

namespace ehelf {
namespace {

constexpr unsigned kPageShift = 12; // page index granularity: 4 KiB
constexpr uint32_t kNoEntry = 0;    // body 0 answers EHELF_NO_ENTRY (gaps between FDEs)

Error too_large(const std::string& why) {
  return Error::plain(fmt::format("{}: {}; the table backend unwinds it", kTooLargeToCompile, why));
}

int slot_minimal(unsigned r) {
  return context_slot(r, RegisterSet::Minimal);
}
int slot_callee_saved(unsigned r) {
  return context_slot(r, RegisterSet::CalleeSaved);
}

std::string signed_literal(int64_t v) {
  return v < 0 ? fmt::format("(uint64_t)-INT64_C({})",
                             static_cast<uint64_t>(0) - static_cast<uint64_t>(v))
               : fmt::format("UINT64_C({})", v);
}

// One row body: its C text, and whether it only answers "needs interpreter" (the table
// backend takes those rows).
struct Body {
  std::string text;
  bool needs_interpreter = false;
};

Body interpreter_body() {
  return {"return ehelf_fail(ctx, EHELF_NEEDS_INTERPRETER);", true};
}

// What a body does to a tracked register when it commits the caller's registers.
enum class Fate : uint8_t {
  Unchanged,       // kept as it is (same value, or no rule)
  Set,             // set to n<slot>, known
  Unknown,         // undefined: no longer known
  SetUnlessFailed, // set to n<slot>, known unless u<slot> (a rule whose read or register failed)
};

// The body of a row of the common shape as one call of the shared ehelf_step (see its comment
// in the generated prelude) with the row's constants, or empty if the row has another shape:
// CFA = tracked register + offset; the return address (column 16) saved at CFA + 8k; the other
// tracked registers saved at CFA + 8k (-128 <= k <= 127), unchanged or undefined; no rule for rsp.
// Most rows have it; a body of its own for each cost libc's callee-saved eh_elf 120 KiB of code.
std::string shared_step_body(RowView row, uint16_t return_column, bool signal_frame,
                             int (*slot_of)(unsigned)) {
  if (row.cfa.kind != CfaRule::Kind::RegOffset || return_column != 16) return {};
  const int cfa_slot = slot_of(row.cfa.reg);
  if (cfa_slot < 0) return {};
  auto packed_offset = [](int64_t offset, uint64_t& out) {
    if (offset % 8 != 0 || offset < -1024 || offset > 1016) return false;
    out = static_cast<uint8_t>(static_cast<int8_t>(offset / 8));
    return true;
  };
  uint64_t saves = 0;
  uint32_t clear = EHELF_FLAG_ERROR | (signal_frame ? 0 : EHELF_FLAG_SIGNAL_FRAME);
  bool ra_saved = false;
  for (const ColumnRule& c : row.columns) {
    const int slot = slot_of(c.column);
    if (slot < 0) continue;   // untracked column: its rule cannot affect tracked registers
    if (slot == 1) return {}; // any rule for rsp (even same value) overrides rsp = CFA
    const RegisterRule& r = c.rule;
    uint64_t k = 0;
    switch (r.kind) {
    case RegisterRule::Kind::SameValue:
      break;
    case RegisterRule::Kind::Undefined:
    case RegisterRule::Kind::Architectural:
      if (slot == 0) return {};
      clear |= EHELF_VALID(slot);
      break;
    case RegisterRule::Kind::Offset:
      if (!packed_offset(r.offset, k)) return {};
      if (slot == 0) {
        saves |= k << 56;
        ra_saved = true;
      } else {
        saves |= (k << (8 * (slot - 2))) | (uint64_t(1) << (48 + slot - 2));
      }
      break;
    default:
      return {};
    }
  }
  if (!ra_saved) return {};
  const uint32_t set =
      EHELF_VALID(0) | EHELF_VALID(1) | (signal_frame ? EHELF_FLAG_SIGNAL_FRAME : 0);
  return fmt::format(
      "NEED({0}); return ehelf_step(ctx, deref, arg, R({0}) + {1}, UINT64_C({2:#x}), "
      "UINT64_C({3:#x}));",
      cfa_slot, signed_literal(row.cfa.offset), saves, (uint64_t(clear) << 32) | set);
}

// Writes the C body for one (row, function facts) pair. Mirrors UnwindTable::evaluate exactly on
// the tracked registers; anything it cannot express returns "needs interpreter".
Body body_for(const UnwindTable& table, RowView row, uint16_t return_column, bool signal_frame,
              RegisterSet set) {
  int (*slot_of)(unsigned) = set == RegisterSet::Minimal ? slot_minimal : slot_callee_saved;
  const int nslots = set == RegisterSet::Minimal ? 4 : 8;
  if (std::string shared = shared_step_body(row, return_column, signal_frame, slot_of);
      !shared.empty())
    return {shared};
  const Body fallback = interpreter_body();
  std::string s;
  int temp = 0;

  // The CFA.
  switch (row.cfa.kind) {
  case CfaRule::Kind::RegOffset: {
    int slot = slot_of(row.cfa.reg);
    if (slot < 0) return fallback;
    s += fmt::format("NEED({}); uint64_t cfa = R({}) + {}; ", slot, slot,
                     signed_literal(row.cfa.offset));
    break;
  }
  case CfaRule::Kind::Expression: {
    auto e = translate_expression(table.expression(row.cfa.expr), slot_of, nullptr, nullptr, temp);
    if (!e) return fallback;
    s += e->statements + fmt::format("uint64_t cfa = {}; ", e->value);
    break;
  }
  case CfaRule::Kind::Undefined:
    return fallback;
  }

  // The return-address column's slot: the one read that must succeed.
  const int ra_slot = slot_of(return_column);
  // New values of the tracked registers, computed from the old ones before any is stored.
  std::vector<Fate> kept(nslots, Fate::Unchanged);
  for (const ColumnRule& c : row.columns) {
    int slot = slot_of(c.column);
    if (slot < 0) continue; // untracked column: its rule cannot affect tracked registers
    const RegisterRule& r = c.rule;
    switch (r.kind) {
    case RegisterRule::Kind::Undefined:
    case RegisterRule::Kind::Architectural:
      kept[slot] = Fate::Unknown;
      break;
    case RegisterRule::Kind::SameValue:
      break;
    case RegisterRule::Kind::Offset:
      if (slot == ra_slot) {
        s += fmt::format("uint64_t n{}; READ(cfa + {}, n{}); ", slot, signed_literal(r.offset),
                         slot);
        kept[slot] = Fate::Set;
      } else {
        // As the interpreter: an unreadable save slot makes the register unknown, not the step
        // fail.
        s += fmt::format("uint64_t n{0} = 0; int u{0} = !ehelf_read(ctx, cfa + {1}, &n{0}, deref, "
                         "arg); ",
                         slot, signed_literal(r.offset));
        kept[slot] = Fate::SetUnlessFailed;
      }
      break;
    case RegisterRule::Kind::ValOffset:
      s += fmt::format("uint64_t n{} = cfa + {}; ", slot, signed_literal(r.offset));
      kept[slot] = Fate::Set;
      break;
    case RegisterRule::Kind::Register: {
      int from = slot_of(r.reg);
      if (from < 0) return fallback;
      s += fmt::format("uint64_t n{} = R({}); int u{} = !HAS({}); ", slot, from, slot, from);
      kept[slot] = Fate::SetUnlessFailed; // unknown if the source register is unknown
      break;
    }
    case RegisterRule::Kind::Expression:
    case RegisterRule::Kind::ValExpression: {
      // As the interpreter: a failing rule for the return address fails the step, for another
      // register makes it unknown (its expression runs in a block its failures break out of).
      const bool ra = slot == ra_slot;
      auto e = translate_expression(table.expression(r.expr), slot_of, "cfa", "cfa", temp,
                                    ra ? OnFailure::FailStep : OnFailure::BreakBlock);
      if (!e) return fallback;
      bool deref = r.kind == RegisterRule::Kind::Expression;
      if (ra) {
        s += e->statements;
        if (deref)
          s += fmt::format("uint64_t n{}; READ({}, n{}); ", slot, e->value, slot);
        else
          s += fmt::format("uint64_t n{} = {}; ", slot, e->value);
        kept[slot] = Fate::Set;
      } else {
        s += fmt::format("uint64_t n{0} = 0; int u{0} = 1; do {{ {1}", slot, e->statements);
        if (deref)
          s += fmt::format("READ_OR_BREAK({}, n{}); ", e->value, slot);
        else
          s += fmt::format("n{} = {}; ", slot, e->value);
        s += fmt::format("u{} = 0; }} while (0); ", slot);
        kept[slot] = Fate::SetUnlessFailed;
      }
      break;
    }
    }
  }
  // The caller's rip comes from the return-address column; its rsp is the CFA unless a rule
  // says otherwise (UnwindTable::evaluate's convention).
  bool rip_rule = row.rule_for(16) != nullptr;
  bool rsp_rule = row.rule_for(7) != nullptr;
  std::string commit = "uint32_t f = ctx->flags; ";
  auto store = [&](int slot, Fate fate) {
    switch (fate) {
    case Fate::Unchanged:
      break;
    case Fate::Set:
      commit += fmt::format("ctx->regs[{0}] = n{0}; f |= EHELF_VALID({0}); ", slot);
      break;
    case Fate::Unknown:
      commit += fmt::format("f &= ~EHELF_VALID({}); ", slot);
      break;
    case Fate::SetUnlessFailed:
      commit += fmt::format("ctx->regs[{0}] = n{0}; f = u{0} ? (f & ~EHELF_VALID({0})) : "
                            "(f | EHELF_VALID({0})); ",
                            slot);
      break;
    }
  };
  for (int slot = 0; slot < nslots; ++slot)
    if (slot != 0) store(slot, kept[slot]);
  if (return_column != 16) {
    int from = slot_of(return_column);
    if (from < 0) return fallback;
    // rip = the caller's value of the return column (after this row's rules).
    commit += fmt::format("ctx->regs[0] = ctx->regs[{0}]; f = (f & EHELF_VALID({0})) ? "
                          "(f | EHELF_VALID(0)) : (f & ~EHELF_VALID(0)); ",
                          from);
  } else if (!rip_rule) {
    commit += "f &= ~EHELF_VALID(0); ";
  } else {
    store(0, kept[0]);
  }
  if (!rsp_rule) commit += "ctx->regs[1] = cfa; f |= EHELF_VALID(1); ";
  commit += signal_frame ? "f |= EHELF_FLAG_SIGNAL_FRAME; " : "f &= ~EHELF_FLAG_SIGNAL_FRAME; ";
  commit += "ctx->flags = f & ~EHELF_FLAG_ERROR; return EHELF_OK;";
  return {s + commit};
}

} // namespace

Result<std::string> generate_eh_elf_source(const UnwindTable& table, const CodegenOptions& options,
                                           CodegenStats* stats_out) {
  CodegenStats stats;
  stats.table_rows = table.row_count();
  auto ranges = table.ranges();
  stats.model_ranges = ranges.size();

  // Bodies: body 0 is "no entry"; others are deduplicated by their text.
  std::vector<Body> bodies = {{"return ehelf_fail(ctx, EHELF_NO_ENTRY);"}};
  std::unordered_map<std::string, uint32_t> body_index;
  // Cache by (row, return column, signal frame): rows repeat across thousands of ranges.
  std::unordered_map<uint64_t, uint32_t> by_row;
  struct Out {
    uint64_t begin;
    uint32_t body;
  };
  std::vector<Out> out;
  out.reserve(ranges.size() + 1);
  if (!ranges.empty()) {
    stats.pc_low = ranges.front().begin;
    stats.pc_high = ranges.back().end;
  }
  if (stats.pc_high - stats.pc_low > UINT32_MAX)
    return Error::plain(fmt::format("the module's code spans {:#x} bytes; eh_elfs support 4 GiB",
                                    stats.pc_high - stats.pc_low));
  uint64_t body_bytes = 0;
  uint64_t prev_end = stats.pc_low;
  for (const TableRange& r : ranges) {
    const FunctionInfo& fn = table.function(r.function);
    uint64_t key = (uint64_t(r.row) << 20) ^ (uint64_t(fn.return_column) << 1) ^ fn.signal_frame;
    uint32_t body;
    if (auto it = by_row.find(key); it != by_row.end()) {
      body = it->second;
    } else {
      Body made =
          body_for(table, table.row(r.row), fn.return_column, fn.signal_frame, options.registers);
      auto [bit, inserted] = body_index.emplace(made.text, static_cast<uint32_t>(bodies.size()));
      if (inserted) {
        if (bodies.size() > options.max_bodies)
          return too_large(fmt::format("more than {} distinct row bodies", options.max_bodies));
        body_bytes += made.text.size();
        stats.fallback_bodies += made.needs_interpreter;
        bodies.push_back(std::move(made));
      }
      body = bit->second;
      by_row.emplace(key, body);
    }
    stats.fallback_ranges += bodies[body].needs_interpreter;
    if (r.begin > prev_end) out.push_back({prev_end, kNoEntry}); // a gap between FDEs
    out.push_back({r.begin, body});
    prev_end = r.end;
  }
  // The starts partition [pc_low, pc_high): neighbours with the same body can always merge.
  std::vector<Out> merged;
  for (const Out& o : out)
    if (merged.empty() || merged.back().body != o.body) merged.push_back(o);
  stats.ranges = merged.size();
  stats.bodies = bodies.size() - 1;
  // Bytes of C before writing it: about 12 per range (start, body number) and per 4 KiB page in
  // the table lookup, 40 per range in the tree, plus the bodies and their functions.
  uint64_t pages = ((stats.pc_high - stats.pc_low) >> kPageShift) + 1;
  uint64_t estimate =
      body_bytes + bodies.size() * 100 +
      (options.lookup == LookupKind::Table ? 12 * (merged.size() + pages) : 40 * merged.size());
  if (estimate > options.max_source_bytes)
    return too_large(fmt::format("about {} bytes of C for {} ranges (limit {})", estimate,
                                 merged.size(), options.max_source_bytes));

  std::string c;
  c.reserve(merged.size() * 12 + bodies.size() * 200 + 8192);
  c += fmt::format("/* eh_elf generated by ehelf from {} */\n", comment_safe(options.source_name));
  c += kEhElfAbiHeader;
  c += R"(
#define R(i) (ctx->regs[i])
#define HAS(i) ((ctx->flags >> (i)) & 1u)
#define NEED(i) do { if (!HAS(i)) return ehelf_fail(ctx, EHELF_MISSING_REGISTER); } while (0)
#define READ(addr, dst) do { if (!ehelf_read(ctx, (addr), &(dst), deref, arg)) \
    return ehelf_fail(ctx, EHELF_BAD_READ); } while (0)
/* Inside the block computing one register: failure leaves the register unknown. */
#define NEED_OR_BREAK(i) if (!HAS(i)) break
#define READ_OR_BREAK(addr, dst) if (!ehelf_read(ctx, (addr), &(dst), deref, arg)) break

static inline __attribute__((always_inline)) int ehelf_fail(ehelf_context_t* ctx, int code) {
  ctx->flags |= EHELF_FLAG_ERROR;
  return code;
}

/* One body serves both variants: deref == 0 means a local, stack-bounded read. Out of line:
 * inlined into every body it made the code half again as large and the compile twice as slow. */
static inline __attribute__((always_inline)) int ehelf_read_inline(const ehelf_context_t* ctx,
    uint64_t addr, uint64_t* out, ehelf_deref_fn deref, void* arg) {
  if (deref) return deref(addr, out, arg) == 0;
  if (addr < ctx->stack_lo || addr > ctx->stack_hi - 8 || ctx->stack_hi < 8) return 0;
  __builtin_memcpy(out, (const void*)(uintptr_t)addr, 8);
  return 1;
}
static __attribute__((noinline)) int ehelf_read(const ehelf_context_t* ctx,
    uint64_t addr, uint64_t* out, ehelf_deref_fn deref, void* arg) {
  return ehelf_read_inline(ctx, addr, out, deref, arg);
}

/* The step of the common row, shared by its bodies, which pass their constants: the caller's
 * rip is read at cfa + 8 * (int8_t)(saves >> 56) (a failed read fails the step, registers
 * untouched); slot 2 + k, for each bit 48 + k set, at cfa + 8 * (int8_t)(saves >> 8k) (a failed
 * read makes it unknown, as the interpreter does); rsp = cfa; then the flags get the low half of
 * `flags` set and the high half cleared (undefined registers, the error and signal bits). */
static __attribute__((noinline)) int ehelf_step(ehelf_context_t* ctx, ehelf_deref_fn deref,
    void* arg, uint64_t cfa, uint64_t saves, uint64_t flags) {
  uint64_t rip;
  if (!ehelf_read_inline(ctx, cfa + (uint64_t)((int64_t)(int8_t)(saves >> 56) * 8), &rip, deref, arg))
    return ehelf_fail(ctx, EHELF_BAD_READ);
  uint32_t f = ctx->flags;
  for (uint32_t m = (uint32_t)(saves >> 48) & 0x3fu; m; m &= m - 1) {
    unsigned k = (unsigned)__builtin_ctz(m);
    uint64_t v = 0;
    int ok = ehelf_read_inline(ctx, cfa + (uint64_t)((int64_t)(int8_t)(saves >> (8 * k)) * 8),
                               &v, deref, arg);
    ctx->regs[k + 2] = v;
    f = ok ? (f | EHELF_VALID(k + 2)) : (f & ~EHELF_VALID(k + 2));
  }
  ctx->regs[EHELF_RIP] = rip;
  ctx->regs[EHELF_RSP] = cfa;
  ctx->flags = (f | (uint32_t)flags) & ~(uint32_t)(flags >> 32);
  return EHELF_OK;
}
)";
  c += fmt::format("#define EHELF_PC_LOW UINT64_C({:#x})\n#define EHELF_PC_HIGH UINT64_C({:#x})\n",
                   stats.pc_low, stats.pc_high);
  if (options.lookup == LookupKind::Table) {
    // Range starts: the low 16 bits of (start - EHELF_PC_LOW). A lookup only compares starts
    // within the 4 KiB page of the pc (hence within its 64 KiB block), found through the page
    // index, so 16 bits are enough: 4 bytes per range with the body number.
    c += fmt::format("static const uint16_t ehelf_starts[{}] = {{", merged.size() + 1);
    for (size_t i = 0; i < merged.size(); ++i) {
      if (i % 16 == 0) c += "\n";
      c += fmt::format("{},", (merged[i].begin - stats.pc_low) & 0xffff);
    }
    c += "0};\n";
    const char* body_type = bodies.size() <= 0xffff ? "uint16_t" : "uint32_t";
    c += fmt::format("static const {} ehelf_body_of[{}] = {{", body_type, merged.size() + 1);
    for (size_t i = 0; i < merged.size(); ++i) {
      if (i % 32 == 0) c += "\n";
      c += fmt::format("{},", merged[i].body);
    }
    c += "0};\n";
    // Page index: for each 4 KiB page of [pc_low, pc_high), the number of ranges that start
    // before the page. Ranges [first[p], first[p+1]) start inside page p; the one before them
    // covers the page's first bytes.
    c += fmt::format("static const uint32_t ehelf_page_first[{}] = {{", pages + 1);
    size_t ri = 0;
    for (uint64_t p = 0; p <= pages; ++p) {
      uint64_t at = stats.pc_low + (p << kPageShift);
      while (ri < merged.size() && merged[ri].begin < at)
        ++ri;
      if (p % 16 == 0) c += "\n";
      c += fmt::format("{},", ri);
    }
    c += "};\n";
  }
  c += "const struct ehelf_info ehelf_eh_elf_info __attribute__((visibility(\"default\"))) = {\n";
  c += fmt::format("  EHELF_ABI_VERSION, {}, {}, {{",
                   options.registers == RegisterSet::Minimal ? "EHELF_REGISTERS_MINIMAL"
                                                             : "EHELF_REGISTERS_CALLEE_SAVED",
                   std::min<size_t>(options.build_id.size(), 64));
  for (size_t i = 0; i < options.build_id.size() && i < 64; ++i)
    c += fmt::format("{:#04x},", options.build_id[i]);
  c += fmt::format("}},\n  EHELF_PC_LOW, EHELF_PC_HIGH, {}, {}, {}\n}};\n", merged.size(),
                   stats.bodies, stats.fallback_bodies);
  if (options.lookup == LookupKind::Table) {
    c += fmt::format(R"(
static inline __attribute__((always_inline)) unsigned ehelf_lookup(uint64_t pc) {{
  if (pc < EHELF_PC_LOW || pc >= EHELF_PC_HIGH) return 0;
  uint32_t off = (uint32_t)(pc - EHELF_PC_LOW);
  uint32_t page = off >> {};
  uint32_t first = ehelf_page_first[page];
  uint32_t lo = first ? first - 1 : 0, hi = ehelf_page_first[page + 1];
  uint16_t low = (uint16_t)off;
  /* lo needs no comparison: it starts at or before the page. Every mid > lo starts inside
   * the page, in the same 64 KiB block as pc, so comparing the low 16 bits is exact. */
  while (hi - lo > 1) {{
    uint32_t mid = lo + (hi - lo) / 2;
    if (ehelf_starts[mid] <= low) lo = mid; else hi = mid;
  }}
  return ehelf_body_of[lo];
}}
)",
                     kPageShift);
  } else {
    // A balanced binary tree of comparisons over the range starts; leaves return the body.
    c += "static inline __attribute__((always_inline)) unsigned ehelf_lookup(uint64_t pc) {\n"
         "  if (pc < EHELF_PC_LOW || pc >= EHELF_PC_HIGH) return 0;\n"
         "  uint32_t off = (uint32_t)(pc - EHELF_PC_LOW);\n";
    struct Emit {
      const std::vector<Out>& ranges;
      uint64_t base;
      std::string& c;
      void operator()(size_t lo, size_t hi) const { // ranges [lo, hi), off >= start(lo)
        if (hi - lo == 1) {
          c += fmt::format("return {};", ranges[lo].body);
          return;
        }
        size_t mid = lo + (hi - lo) / 2;
        c += fmt::format("if (off < {:#x}u) {{", ranges[mid].begin - base);
        (*this)(lo, mid);
        c += "} else {";
        (*this)(mid, hi);
        c += "}\n";
      }
    };
    if (merged.empty())
      c += "return 0;";
    else
      Emit{merged, stats.pc_low, c}(0, merged.size());
    c += "\n}\n";
  }
  // Each body is a small function shared by both variants; a table of pointers dispatches.
  // (A monolithic switch, or a local and a remote copy of every body, took the C compiler two
  // to three times longer on large libraries and doubled the code.)
  for (size_t i = 0; i < bodies.size(); ++i)
    c += fmt::format("static int ehelf_body_{}(ehelf_context_t* ctx, ehelf_deref_fn deref, "
                     "void* arg) {{ {} }}\n",
                     i, bodies[i].text);
  c += "typedef int (*ehelf_body_fn)(ehelf_context_t*, ehelf_deref_fn, void*);\n";
  c += "static const ehelf_body_fn ehelf_bodies[] = {";
  for (size_t i = 0; i < bodies.size(); ++i)
    c += fmt::format("{}ehelf_body_{},", i % 8 ? "" : "\n", i);
  c += R"(};

__attribute__((visibility("default"))) int ehelf_unwind_local(uint64_t pc, ehelf_context_t* ctx) {
  return ehelf_bodies[ehelf_lookup(pc)](ctx, 0, 0);
}

__attribute__((visibility("default"))) int ehelf_unwind_remote(uint64_t pc, ehelf_context_t* ctx,
    ehelf_deref_fn deref, void* arg) {
  if (!deref) return ehelf_fail(ctx, EHELF_BAD_READ);
  return ehelf_bodies[ehelf_lookup(pc)](ctx, deref, arg);
}
)";
  if (c.size() > options.max_source_bytes)
    return too_large(fmt::format("{} bytes of C (limit {})", c.size(), options.max_source_bytes));
  if (stats_out) *stats_out = stats;
  return c;
}

} // namespace ehelf
