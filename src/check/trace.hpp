// check::TraceWriter and check::TraceReader: the executed path of `ehelf check --record FILE`,
// compactly, so that `ehelf check --replay FILE` judges it again against other tables without
// running the program.
//
// What is recorded is what the row check (row_check.hpp) reads, for each instruction it checked
// or would check against any table (one in a checked module, with the thread's innermost frame
// known): where the instruction is (module, SVMA), the registers before it (as far as known: a
// straight-line run's simulated states lack the registers the x86 layer could not follow), the
// innermost shadow frame, and the memory words the check read. Registers, frames and addresses
// are deltas from the same thread's previous ones, so a step costs ~5 bytes.
//
// Format, version 1. Integers are LEB128 (u: unsigned, s: signed) unless said otherwise.
//   header   "EHELFTRC" (8 bytes), version (u16, little-endian) = 1
//   records  a tag byte, then the record's fields; `end` is the last, then the file ends
//   0x01 module  u index (0, 1, ... in order), u path length (1..4096), path, u build-id length
//                (<= 64), build id, u bias (AVMA - SVMA), u image length (<= 1 MiB), image (the
//                ELF image of a module read from memory: the vDSO; empty for a file)
//   0x02 thread  u tid (1..2^31-1): the records that follow are this thread's
//   0x03 frame   the thread's innermost shadow frame, as changes from its previous one (all
//                zero before the first): u mask; bit 0: s slot delta; bit 1: s return-address
//                delta; bit 2+i: s delta of callee-saved register i's value at entry (i: rbx rbp
//                r12 r13 r14 r15); bit 8+i: register i's save slots: u count (<= 4), then count x
//                s (slot - frame slot)
//   0x04 memory  u address, u size (0..8; 0: the read failed), size bytes: a read the check made
//                for the next step
//   0x05 step    u flags (bit 0: u module index follows; bit 1: u known-register mask follows,
//                bit r: DWARF register r, 0-16), s SVMA delta, u mask of the registers (DWARF
//                0-15) whose value changed, then s delta of each, lowest first; rip is the
//                module's bias + SVMA
//   0x06 end     u count (<= 64) of counters, then each (u): steps, threads, calls, resyncs,
//                signals, blocks, block mismatches, unchecked signal steps, microseconds, step
//                limit (0/1), exec (0/1), exit status + 1 (0: none), processes, execs
// A reader meeting a later version, an unknown tag, a field out of its bounds, or the file's end
// before `end` stops with one error naming the file and the offset.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "check/shadow_stack.hpp"
#include "check/validator.hpp"
#include "elf/mapped_file.hpp"
#include "model/memory_reader.hpp"
#include "model/register_state.hpp"
#include "support/byte_cursor.hpp"
#include "support/output_file.hpp"
#include "support/result.hpp"

namespace ehelf::check {

constexpr uint16_t kTraceVersion = 1;

// A memory read the check made: `size` bytes at `address` (size 0: the read failed).
struct MemoryWord {
  uint64_t address = 0;
  uint8_t size = 0;
  uint64_t value = 0; // little-endian bytes
};

// One module of the trace.
struct TraceModule {
  std::string path; // the file, or "[vdso]"; as read (message_safe it before printing)
  std::vector<uint8_t> build_id;
  uint64_t bias = 0;
  std::vector<uint8_t> image; // the ELF image when the module was read from memory
  uint64_t record_offset = 0; // where its record starts in the trace (for errors)
};

// What the deltas of one thread's records are taken from: its last frame, registers, SVMA and
// module (the writer's and the reader's, which stay equal).
struct TraceThreadState {
  ShadowFrame frame;
  RegisterState regs;
  uint64_t svma = 0;
  uint32_t module = 0;
};

class TraceWriter {
public:
  // The trace is an OutputFile: it appears at `path` only when finish() succeeds.
  static Result<std::unique_ptr<TraceWriter>> create(const std::string& path);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // The index of the module (path, bias), writing its record the first time.
  uint32_t module(const TraceModule& m);
  // An instruction checked: the registers before it, its innermost frame, the reads made.
  void step(pid_t tid, uint32_t module, uint64_t svma, const RegisterState& regs,
            const ShadowFrame& frame, std::span<const MemoryWord> reads);
  // The end record with the run's counts; writes everything out. An error if a write failed.
  Status finish(const CheckSummary& summary);

private:
  explicit TraceWriter(OutputFile out) : out_(std::move(out)) {}
  void flush();

  OutputFile out_;
  std::vector<uint8_t> buffer_;
  std::unordered_map<std::string, uint32_t> modules_; // "bias path" -> index
  std::unordered_map<pid_t, TraceThreadState> threads_;
  pid_t current_ = 0;
};

class TraceReader {
public:
  // Maps the file and reads its header.
  static Result<std::unique_ptr<TraceReader>> open(const std::string& path);
  // Over bytes in memory (the fuzz target); `name` names them in errors.
  static Result<std::unique_ptr<TraceReader>> over(std::span<const uint8_t> bytes,
                                                   std::string name);

  enum class Event : uint8_t { module, step, end };
  // Reads records up to the next module, step or the end.
  Result<Event> next();

  // After Event::module: the new module (index: modules().size() - 1).
  const std::vector<TraceModule>& modules() const { return modules_; }
  // After Event::step: the instruction and the state before it.
  pid_t tid() const { return tid_; }
  uint32_t module() const { return step_->module; }
  uint64_t svma() const { return step_->svma; }
  const RegisterState& regs() const { return step_->regs; }
  const ShadowFrame& frame() const { return step_->frame; }
  std::span<const MemoryWord> reads() const { return reads_; }
  // After Event::end: the live run's counts (those a replay cannot know).
  const CheckSummary& recorded() const { return recorded_; }
  // The trace's name, as errors name it.
  const std::string& name() const { return name_; }

private:
  TraceReader(std::span<const uint8_t> bytes, std::string name) : in_(bytes), name_(name) {}
  Status header();
  Error error(uint64_t offset, std::string message) const;
  Status read_module();
  Status read_frame();
  Status read_step();
  Status read_end();

  std::unique_ptr<MappedFile> file_;
  ByteCursor in_;
  std::string name_;
  std::vector<TraceModule> modules_;
  std::unordered_map<pid_t, TraceThreadState> threads_;
  pid_t tid_ = 0;
  TraceThreadState* step_ = nullptr;
  std::vector<MemoryWord> reads_, pending_;
  CheckSummary recorded_;
};

// The process's memory as the live check reads it, each read kept for the trace.
class RecordingMemory final : public MemoryReader {
public:
  explicit RecordingMemory(MemoryReader& inner) : inner_(inner) {}
  bool read(uint64_t addr, void* out, size_t size) override;
  std::vector<MemoryWord>& reads() { return reads_; }

private:
  MemoryReader& inner_;
  std::vector<MemoryWord> reads_;
};

// A replayed step's memory: the words recorded with it. A read of anything else fails and sets
// `unknown` (the trace does not say), so the check leaves the instruction undetermined.
class RecordedMemory final : public MemoryReader {
public:
  explicit RecordedMemory(std::span<const MemoryWord> words) : words_(words) {}
  bool read(uint64_t addr, void* out, size_t size) override;
  bool unknown = false;

private:
  std::span<const MemoryWord> words_;
};

} // namespace ehelf::check
