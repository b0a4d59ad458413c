// A perf.data recording read once into what every unwinder under test needs: per sample the
// user registers (DWARF numbering) and the stack copy, and the modules of the sampled process at
// that moment (its executable mappings whose files are on this machine with the recorded build
// id). Module files are opened once and shared by every peer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "elf/elf_file.hpp"
#include "model/register_state.hpp"
#include "perf/perf_data.hpp"

namespace table1 {

// One module file, opened once.
struct ModuleFile {
  std::string path;
  std::unique_ptr<ehelf::ElfFile> elf;
  std::vector<ehelf::Segment> loads; // its PT_LOAD segments with bytes in the file
  // Reads `size` bytes at the file's SVMA `svma` (through its PT_LOAD segments): what a
  // profiler reads from the file for addresses outside the stack copy (unwind tables).
  bool read(uint64_t svma, void* out, size_t size) const;
};

// A module of a process: an executable mapping whose file is usable here.
struct ModuleRef {
  uint64_t start = 0, end = 0; // the executable mapping
  uint64_t bias = 0;           // AVMA - SVMA
  const ModuleFile* file = nullptr;
};

// The modules of one process from one mmap to the next (immutable; samples point to it).
struct Maps {
  size_t index = 0;               // in Recording::maps (peers keep their state per index)
  std::vector<ModuleRef> modules; // sorted by start
  // Where each module's file image lies (bias + its PT_LOAD segments), sorted: reads outside the
  // stack (unwind tables) find their module by binary search, as perf's map lookup does.
  struct Image {
    uint64_t begin, end;
    const ModuleRef* module;
  };
  std::vector<Image> images;
  // Mappings without a usable file (name, for reports).
  std::vector<std::pair<uint64_t, std::string>> missing;
  const ModuleRef* find(uint64_t avma) const;
  // Reads memory outside the stack from the module files (false: no module holds it).
  bool read_file(uint64_t avma, void* out, size_t size) const;
};

struct Sample {
  const Maps* maps = nullptr;
  uint32_t pid = 0, tid = 0;
  // The recorded registers by DWARF number (rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip), as an
  // ehelf walk takes them (the other peers read them one by one through callbacks).
  ehelf::RegisterState regs;
  uint64_t sp() const { return regs.get(7); }
  uint64_t ip() const { return regs.get(16); }
  std::span<const uint8_t> stack; // the copy of [sp, sp + size)
  // Reads the stack copy (false outside it).
  bool read_stack(uint64_t addr, void* out, size_t size) const;
};

struct Recording {
  std::string path;
  std::unique_ptr<ehelf::perf::PerfData> data;
  std::vector<std::unique_ptr<ModuleFile>> files;
  std::vector<std::shared_ptr<const Maps>> maps; // every version a sample uses, in order
  std::vector<Sample> samples;                   // user samples with registers and a stack copy
  // What samples' stack copies point into besides the file (data perf record -z compressed).
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> storage;
  uint64_t all_samples = 0; // every sample record, kernel threads included
};

// Reads the recording: follows mmap, comm (exec) and fork in time order. At most `limit`
// samples (0: all). Exits with a one-line message when the file cannot be read.
Recording read_recording(const std::string& path, size_t limit);

} // namespace table1
