// RowLookup: the unwind row in force at one address, straight from a module's .eh_frame_hdr
// search table and .eh_frame bytes. The FDE is found by binary search, its CIE and both CFA
// programs are decoded and run up to the address with fixed-size state (DWARF 5 section 6.4.2;
// LSB "Exception Frames"). Nothing here allocates, takes a lock or reads outside the spans it
// is given, so a rule-cache miss can be served inside a signal handler, and a module is never
// parsed whole just to unwind a few of its pcs.
//
// It reads CIEs with read_cie_fields and applies instructions with apply_cfa_instruction
// (cfa_program.hpp), as the whole-module path (CfaInterpreter into an UnwindTable) does, on fixed
// storage: the two give the same rows for every address the FDEs cover, projected onto the
// registers the runtime tracks (DWARF 0-16); the test `RowLookup.SameRowsAsTheTable` compares
// them on every range of real libraries.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "dwarf/cfi_limits.hpp"
#include "model/registers.hpp"
#include "model/unwind_table.hpp"

namespace ehelf {

// Where a module's call-frame bytes are, as SVMAs (the addresses its file links them at).
struct CfiImage {
  std::span<const uint8_t> hdr; // .eh_frame_hdr
  uint64_t hdr_addr = 0;
  // .eh_frame, or more: reads of an FDE or CIE never go past the span, so the span may run to
  // the end of the segment that holds the section when its own end is unknown (a loaded image).
  std::span<const uint8_t> eh_frame;
  uint64_t eh_frame_addr = 0;
  // Bytes filled on demand (a copy of a loaded image made page by page): called before any read
  // of [p, p + n) inside `hdr` or `eh_frame`; false when they cannot be had. Null: all present.
  bool (*fill)(const void* context, const uint8_t* p, size_t n) = nullptr;
  const void* fill_context = nullptr;
  bool ready(const uint8_t* p, size_t n) const { return !fill || fill(fill_context, p, n); }
};

// The row for one address, with its expressions as byte spans into the CfiImage.
struct FoundRow {
  static constexpr unsigned kColumns = x86_64::kGeneralRegs;
  CfaRule cfa;                  // an Expression's `expr` indexes `expressions`
  ColumnRule columns[kColumns]; // sorted by column, count of them used
  unsigned count = 0;
  std::span<const uint8_t> expressions[kColumns + 1];
  unsigned expression_count = 0;
  FunctionInfo function;
  uint64_t begin = 0, end = 0; // the addresses (SVMAs) the row covers

  RowView view() const { return RowView{cfa, {columns, count}}; }
  // A row's expressions, decoded into fixed storage when evaluated (no allocation).
  struct Expressions final : RowExpressions {
    const FoundRow& row;
    explicit Expressions(const FoundRow& r) : row(r) {}
    Result<uint64_t> evaluate(uint32_t expr, const RegisterState& regs, MemoryReader& mem,
                              std::optional<uint64_t> initial, std::optional<uint64_t> cfa,
                              const EvalLimits& limits) const override;
  };
};

enum class RowStatus : uint8_t {
  Found,
  NoEntry,    // no FDE covers the address
  Malformed,  // the entry, its CIE or a program is malformed
  TooComplex, // beyond the fixed limits (kMaxRemembered, offsets over 32 bits, return column)
};

class RowLookup {
public:
  // remember_state depth, and instructions run per lookup: what fixed state can hold, and a
  // bound on the time a hostile program can take (real FDEs run tens of instructions, at most
  // about a thousand). An FDE of more rows than a table may hold is refused (TooComplex) too,
  // as the table's interpreter refuses it: cfi_limits.hpp.
  static constexpr unsigned kMaxRemembered = 4;
  static constexpr uint64_t kMaxInstructions = cfi_limits::kMaxInstructionsPerProgram;

  RowLookup() = default;
  // Checks the header; false when it has no search table this can use (binary search needs
  // fixed-size entries: GNU ld, gold, lld and mold all write DW_EH_PE_datarel | sdata4; tables
  // made for frames registered at run time may be datarel | sdata8).
  bool init(const CfiImage& image);
  // The SVMA of .eh_frame as the header at `hdr_addr` records it (a loaded image's way to find
  // the section); none if the header is malformed.
  static std::optional<uint64_t> eh_frame_address(std::span<const uint8_t> hdr, uint64_t hdr_addr);
  // Whether a header of `hdr_size` bytes at `hdr_addr` that starts with `hdr_start` (its first
  // 32 bytes, or all of it) has a search table init() can use: what a loaded image can tell
  // without copying the table.
  static bool has_search_table(std::span<const uint8_t> hdr_start, uint64_t hdr_addr,
                               uint64_t hdr_size);
  bool usable() const { return count_ != 0; }
  size_t fde_count() const { return count_; }
  const CfiImage& image() const { return image_; }

  RowStatus find(uint64_t svma, FoundRow& out) const;
  // Only the function (FDE) covering `svma`: its range, CIE flags, LSDA and personality, without
  // running the CFA programs (a fraction of find()'s cost: what naming a frame needs).
  RowStatus find_function(uint64_t svma, FunctionInfo& out) const;

  // Every row of every FDE the search table lists, as a whole UnwindTable (what the eh_frame
  // path builds from the section): for accelerators built outside signal handlers from a loaded
  // image, where there is no section to parse. Allocates. Entries that cannot be read or
  // interpreted are left out, as find() would answer them. None past the limits on a module's
  // rows (cfi_limits.hpp): find() still answers each address.
  std::optional<UnwindTable> whole_table() const;

private:
  struct LocatedFde;
  RowStatus locate(uint64_t svma, LocatedFde& out) const;

  // Entry i's initial location (half 0) or FDE address (half 1); `present` false when its bytes
  // could not be had.
  uint64_t entry_value(uint64_t i, unsigned half, bool& present) const;

  CfiImage image_;
  uint64_t table_offset_ = 0; // of the search table within hdr
  uint64_t count_ = 0;
  unsigned entry_size_ = 8; // datarel sdata4 entries (8 bytes) or sdata8 (16)
};

} // namespace ehelf
