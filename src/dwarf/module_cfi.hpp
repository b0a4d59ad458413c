// ModuleCfi: the call-frame sections of one ELF module, parsed; and the builder that turns them
// into the module's UnwindTable.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dwarf/cfi_section.hpp"
#include "dwarf/eh_frame_hdr.hpp"
#include "elf/elf_file.hpp"
#include "model/unwind_table.hpp"
#include "support/result.hpp"

namespace ehelf {

struct LoadOptions {
  bool eh_frame = true;
  bool debug_frame = true;
  // Also read .debug_frame from a separate debug file (build-id or .gnu_debuglink) when the
  // module itself has none.
  bool separate_debug_file = true;
  // And the separate debug file's .eh_frame when the module has none (stripped by objcopy, or no
  // FDE in it): `ehelf synth -o` writes such debug files. Off where the output must be readelf's,
  // which reads only .debug_frame from debug files.
  bool separate_eh_frame = false;
  // Where debug files are looked up by build id (DIR/.build-id/xx/yyyy.debug), in order, and
  // where .gnu_debuglink names are also tried (DIR/<the module's directory>/NAME).
  std::vector<std::string> debug_dirs = {kSystemDebugDir};
};

struct ModuleCfi {
  std::unique_ptr<ElfFile> elf;
  std::unique_ptr<ElfFile> debug_elf; // where .debug_frame came from, if not `elf`
  bool eh_frame_separate = false;     // .eh_frame came from debug_elf (LoadOptions)
  std::optional<CfiSection> eh_frame;
  std::optional<CfiSection> debug_frame;
  PointerBases eh_frame_bases;
  PointerBases debug_frame_bases;
  std::optional<EhFrameHdr> eh_frame_hdr;
  std::optional<Error> eh_frame_hdr_error;
  std::vector<std::string> eh_frame_hdr_problems;

  bool has_tables() const { return eh_frame || debug_frame; }
  // The file `section` (eh_frame or debug_frame) was read from.
  const ElfFile& owner(const CfiSection& section) const;
  // The first parse error of either section, with the file name filled in.
  std::optional<Error> first_error() const;
};

Result<ModuleCfi> load_module_cfi(const std::string& path, const LoadOptions& options = {});
Result<ModuleCfi> load_module_cfi(std::unique_ptr<ElfFile> elf, const LoadOptions& options = {});

// The search table a module without a usable .eh_frame_hdr lacks (linked with
// --no-eh-frame-hdr, or its header lists no FDE): an .eh_frame_hdr made from the FDEs of `elf`'s
// .eh_frame, placed (hdr_addr) at the section's own address. `eh_frame` points into `elf`.
struct MadeSearchTable {
  std::vector<uint8_t> hdr;
  uint64_t hdr_addr = 0;
  std::span<const uint8_t> eh_frame;
  uint64_t eh_frame_addr = 0;
};
// Fails, naming the file, without an .eh_frame holding an FDE, or when its addresses do not fit
// the table's 32-bit entries. FDEs after a malformed entry are left out (lookups in their
// ranges find none).
Result<MadeSearchTable> make_search_table(const ElfFile& elf);

// Counters gathered while building (for reports and tests).
struct TableBuildStats {
  uint64_t fdes = 0;
  uint64_t empty_fdes = 0; // pc_range == 0 or discarded (pc_begin == 0 in a relocatable module)
  uint64_t rows = 0;       // emitted rows before deduplication
};

// Builds the table from .eh_frame first, then .debug_frame (for ranges .eh_frame lacks).
// Fails on the first malformed entry, naming file, section and offset.
Result<UnwindTable> build_unwind_table(const ModuleCfi& module, TableBuildStats* stats = nullptr);

} // namespace ehelf
