// PerfData: a perf.data file (`perf record` output, file or pipe layout) decoded into its event
// attributes, header features and records. Records point into the file's bytes (which PerfData
// keeps mapped); nothing is read outside them: every length a record or header claims is checked
// and a violation is an Error naming the file and the byte offset.
//
// Covers what turning `perf record --call-graph dwarf` data into stacks needs: samples (every
// sample_type field, including user registers and the user stack copy), mmap/mmap2 (with build
// ids), comm, fork and exit, and the build-id, hostname, OS release, architecture and event-name
// header features. Other records are returned with their type and time only. Little-endian files
// only (big-endian perf.data is refused).
#pragma once

#include <asm/perf_regs.h>
#include <linux/perf_event.h>

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "elf/mapped_file.hpp"
#include "support/result.hpp"

namespace ehelf::perf {

// perf_event_attr fields the reader uses.
struct EventAttr {
  uint32_t type = 0;
  uint64_t config = 0;
  uint64_t sample_period = 0;
  uint64_t sample_type = 0;
  uint64_t read_format = 0;
  uint64_t flags = 0; // the bit fields after read_format (disabled, inherit, ..., sample_id_all)
  uint64_t branch_sample_type = 0;
  uint64_t sample_regs_user = 0;
  uint32_t sample_stack_user = 0;
  uint64_t sample_regs_intr = 0;
  std::vector<uint64_t> ids; // sample ids of this event (matched by PERF_SAMPLE_ID/IDENTIFIER)
  std::string name;          // from the event-description feature, else empty
  bool sample_id_all() const { return (flags >> 18) & 1; }
  bool freq() const { return (flags >> 10) & 1; }
  // What one sample stands for when it does not say (no PERF_SAMPLE_PERIOD): the fixed period,
  // as perf script reads it, or 1 (a frequency, or no attr).
  uint64_t fixed_period() const { return !freq() && sample_period != 0 ? sample_period : 1; }
};

// PERF_SAMPLE_* bits (<linux/perf_event.h>), as the unsigned 64-bit masks sample_type is.
namespace sample {
constexpr uint64_t kIp = PERF_SAMPLE_IP, kTid = PERF_SAMPLE_TID, kTime = PERF_SAMPLE_TIME,
                   kAddr = PERF_SAMPLE_ADDR, kRead = PERF_SAMPLE_READ,
                   kCallchain = PERF_SAMPLE_CALLCHAIN, kId = PERF_SAMPLE_ID, kCpu = PERF_SAMPLE_CPU,
                   kPeriod = PERF_SAMPLE_PERIOD, kStreamId = PERF_SAMPLE_STREAM_ID,
                   kRaw = PERF_SAMPLE_RAW, kBranchStack = PERF_SAMPLE_BRANCH_STACK,
                   kRegsUser = PERF_SAMPLE_REGS_USER, kStackUser = PERF_SAMPLE_STACK_USER,
                   kWeight = PERF_SAMPLE_WEIGHT, kDataSrc = PERF_SAMPLE_DATA_SRC,
                   kIdentifier = PERF_SAMPLE_IDENTIFIER, kTransaction = PERF_SAMPLE_TRANSACTION,
                   kRegsIntr = PERF_SAMPLE_REGS_INTR, kPhysAddr = PERF_SAMPLE_PHYS_ADDR,
                   kAux = PERF_SAMPLE_AUX, kCgroup = PERF_SAMPLE_CGROUP,
                   kDataPageSize = PERF_SAMPLE_DATA_PAGE_SIZE,
                   kCodePageSize = PERF_SAMPLE_CODE_PAGE_SIZE,
                   kWeightStruct = PERF_SAMPLE_WEIGHT_STRUCT;
} // namespace sample

// Record types: the kernel's (PERF_RECORD_*, <linux/perf_event.h>) and perf's own from 64 on
// (PERF_RECORD_USER_TYPE_START; perf's tools/lib/perf/include/perf/event.h, not installed).
namespace record_type {
constexpr uint32_t kMmap = PERF_RECORD_MMAP, kLost = PERF_RECORD_LOST, kComm = PERF_RECORD_COMM,
                   kExit = PERF_RECORD_EXIT, kThrottle = PERF_RECORD_THROTTLE,
                   kUnthrottle = PERF_RECORD_UNTHROTTLE, kFork = PERF_RECORD_FORK,
                   kRead = PERF_RECORD_READ, kSample = PERF_RECORD_SAMPLE,
                   kMmap2 = PERF_RECORD_MMAP2, kLostSamples = PERF_RECORD_LOST_SAMPLES,
                   kHeaderAttr = 64, kHeaderTracingData = 66, kHeaderBuildId = 67,
                   kFinishedRound = 68, kAuxtrace = 71, kHeaderFeature = 80, kCompressed = 81;
} // namespace record_type

// perf's x86_64 register numbers (arch/x86/include/uapi/asm/perf_regs.h).
namespace perf_reg {
constexpr unsigned kAx = PERF_REG_X86_AX, kBx = PERF_REG_X86_BX, kCx = PERF_REG_X86_CX,
                   kDx = PERF_REG_X86_DX, kSi = PERF_REG_X86_SI, kDi = PERF_REG_X86_DI,
                   kBp = PERF_REG_X86_BP, kSp = PERF_REG_X86_SP, kIp = PERF_REG_X86_IP,
                   kFlags = PERF_REG_X86_FLAGS, kR8 = PERF_REG_X86_R8, kR15 = PERF_REG_X86_R15;
static_assert(kR15 == kR8 + 7);
// Each general register's DWARF number (x86_64::DwarfReg), by perf's number: a sample's
// registers as an unwind takes them.
struct ToDwarf {
  unsigned perf;
  uint16_t dwarf;
};
inline constexpr ToDwarf kGeneral[] = {
    {kAx, 0},      {kDx, 1},      {kCx, 2},      {kBx, 3},     {kSi, 4},      {kDi, 5},
    {kBp, 6},      {kSp, 7},      {kR8, 8},      {kR8 + 1, 9}, {kR8 + 2, 10}, {kR8 + 3, 11},
    {kR8 + 4, 12}, {kR8 + 5, 13}, {kR8 + 6, 14}, {kR15, 15},   {kIp, 16}};
// sample_regs_user for all of them.
inline constexpr uint64_t kGeneralMask = [] {
  uint64_t m = 0;
  for (const ToDwarf& r : kGeneral)
    m |= uint64_t(1) << r.perf;
  return m;
}();
} // namespace perf_reg

// Where each general register is in the samples of one sample_regs_user mask: its index among
// the sample's registers by DWARF number, or -1. Computed once per mask, so that reading a
// sample's registers is one load each.
struct GeneralRegLayout {
  uint64_t mask = 0;
  std::array<int8_t, 17> index{};

  explicit GeneralRegLayout(uint64_t regs_mask = 0) : mask(regs_mask) {
    index.fill(-1);
    for (const perf_reg::ToDwarf& r : perf_reg::kGeneral)
      if (regs_mask & (uint64_t(1) << r.perf))
        index[r.dwarf] =
            static_cast<int8_t>(std::popcount(regs_mask & ((uint64_t(1) << r.perf) - 1)));
  }
};

// misc & kCpumodeMask.
enum class CpuMode : uint8_t {
  Unknown = 0,
  Kernel = 1,
  User = 2,
  Hypervisor = 3,
  GuestKernel = 4,
  GuestUser = 5
};

struct SampleRecord {
  const EventAttr* attr = nullptr;
  uint64_t id = 0, ip = 0, time = 0, addr = 0, stream_id = 0, period = 0;
  uint32_t pid = 0, tid = 0, cpu = 0;
  std::span<const uint8_t> callchain; // nr u64 addresses (PERF_CONTEXT_* markers included)
  uint64_t regs_abi = 0;              // 0: no user registers (a kernel thread)
  uint64_t regs_mask = 0;             // attr->sample_regs_user
  std::span<const uint8_t> regs;      // one u64 per bit of regs_mask, in bit order
  std::span<const uint8_t> stack;     // the user stack copied from the sample's rsp up
  uint64_t stack_dyn_size = 0;        // how much of `stack` is valid
  size_t callchain_size() const { return callchain.size() / 8; }
  uint64_t callchain_at(size_t i) const;
  // A user register by perf number; false if the sample does not have it.
  bool reg(unsigned perf_reg, uint64_t& value) const;
  // The sample's weight: its period (PERF_SAMPLE_PERIOD), else its event's fixed period.
  uint64_t weight() const;
  // The valid part of the stack copy.
  std::span<const uint8_t> stack_data() const {
    return stack.first(std::min<size_t>(stack.size(), stack_dyn_size));
  }
};

struct MmapRecord {
  uint32_t pid = 0, tid = 0;
  uint64_t start = 0, len = 0, pgoff = 0;
  uint32_t prot = 0, flags = 0; // mmap2 only; mmap records are executable mappings
  bool mmap2 = false;
  std::span<const uint8_t> build_id; // mmap2 with PERF_RECORD_MISC_MMAP_BUILD_ID
  std::string_view filename;
  bool executable() const { return !mmap2 || (prot & 4); } // PROT_EXEC
};

struct CommRecord {
  uint32_t pid = 0, tid = 0;
  std::string_view comm;
  bool exec = false; // the comm changed by exec (PERF_RECORD_MISC_COMM_EXEC)
};

struct TaskRecord { // fork or exit
  uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  uint64_t time = 0;
};

struct LostRecord { // PERF_RECORD_LOST (id: the event), PERF_RECORD_LOST_SAMPLES (id 0)
  uint64_t id = 0, lost = 0;
};

struct Record {
  uint32_t type = 0;
  uint16_t misc = 0;
  uint16_t size = 0;   // the record's bytes, header included
  uint64_t offset = 0; // in the file (in a pipe: in the stream)
  uint64_t time = 0;   // the sample's or the sample_id trailer's time; 0 if the record has none
  std::variant<std::monostate, SampleRecord, MmapRecord, CommRecord, TaskRecord, LostRecord> body;
  // The bytes `body` points into when they are not the recording's own (a pipe's buffer, data
  // decompressed from PERF_RECORD_COMPRESSED): kept alive as long as the record is, and let go
  // with the last record that points into them.
  std::shared_ptr<const std::vector<uint8_t>> storage;
  CpuMode cpumode() const { return static_cast<CpuMode>(misc & 7); }
};

// Decodes one record the kernel writes (type below kHeaderAttr) whose event is `a`: `body` is
// what follows its 8-byte header, at `body_offset` in the data (for errors); r.type and r.misc
// are set by the caller. Samples, mmap/mmap2, comm, fork/exit and lost records get their body,
// other types only their time. False with `why` when the record is shorter than its fields say;
// nothing is read outside `body`. Used for perf.data files and for live ring buffers alike.
bool decode_kernel_record(std::span<const uint8_t> body, uint64_t body_offset, const EventAttr& a,
                          Record& r, std::string& why);

// A HEADER_BUILD_ID entry: the build id perf recorded for a file.
struct BuildIdEntry {
  uint32_t pid = 0;
  bool kernel = false;
  std::vector<uint8_t> build_id;
  std::string filename;
};

class PerfData {
  struct ZstdStream;

public:
  static Result<PerfData> open(const std::string& path);
  // From bytes in memory (tests, fuzzing); `name` names them in errors.
  static Result<PerfData> from_bytes(std::vector<uint8_t> bytes, std::string name);
  // A recording in perf's pipe layout coming from `fd` (`perf record -o - | ehelf perf`): its
  // header and the header records before the first record the kernel wrote (attributes,
  // features) are read now, the records as a Reader asks for them. Header records after the
  // first kernel record are not applied (perf writes none there).
  static Result<PerfData> read_stream(int fd, std::string name);

  const std::string& name() const { return name_; }
  bool pipe_mode() const { return pipe_; }
  // Where the data ends in the file (for progress); 0 for a stream, whose end is not known yet.
  uint64_t data_end() const { return stream_fd_ >= 0 ? 0 : data_offset_ + data_size_; }
  const std::vector<EventAttr>& attrs() const { return attrs_; }
  const std::vector<BuildIdEntry>& build_ids() const { return build_ids_; }
  const std::string& hostname() const { return hostname_; }
  const std::string& os_release() const { return os_release_; }
  const std::string& arch() const { return arch_; }

  // The records of the data in file order, a batch at a time: decoded as they are asked for (from
  // a pipe, read as they are asked for), so that memory holds what the caller keeps rather than
  // the recording. Compressed records (perf record -z) come decompressed (at most 2 GiB in all).
  // Records that describe the file (pipe mode's attr and build-id records) have already been
  // applied to attrs() and build_ids() and are not repeated. Records point into the file or
  // into their `storage`. One Reader at a time per PerfData (a pipe is read once).
  class Reader {
  public:
    explicit Reader(const PerfData& data);
    ~Reader();
    Reader(Reader&&) noexcept;
    Reader& operator=(Reader&&) = delete;
    // Appends the next records to `out` (at most about kBatch of them, a compressed record's
    // too); `done` when the data has no more. A malformed record is an Error naming the file
    // and its offset, the records before it appended.
    Status next_batch(std::vector<Record>& out, bool& done);
    // How far the data has been read, in bytes from the start of the file or stream.
    uint64_t position() const { return base_ + pos_; }
    static constexpr size_t kBatch = 1024;

  private:
    // A pipe: a new window holding the current one's unread bytes and more from the stream.
    Status refill(bool& got_more);
    const PerfData* data_;
    std::unique_ptr<ZstdStream> zstd_;
    std::shared_ptr<const std::vector<uint8_t>> chunk_; // the window's bytes, but for a file
    std::span<const uint8_t> window_;
    uint64_t base_ = 0;     // the offset of window_[0]
    size_t pos_ = 0;        // in window_
    size_t end_ = 0;        // of the data in window_
    uint64_t skip_ = 0;     // a pipe: payload bytes after a record still to be read past
    uint64_t released_ = 0; // the file offset of the last release_pages()
  };

  // Every record of the data (at most 16M) in file order: a Reader's batches, all at once.
  // Stops at the first malformed one: the error names the file and its offset.
  // With `damage`: a malformed record ends the list instead of failing it; the records before
  // it are returned and *damage says where and why (perf salvages a damaged recording so too).
  Result<std::vector<Record>> records(std::optional<Error>* damage = nullptr) const;
  // Damage found in the header (a truncated file, a recording killed before perf wrote its
  // sizes): the data was read up to it. None for an intact file.
  const std::optional<Error>& header_damage() const { return damage_; }

  // Lets the mapped file's pages leave resident memory (see MappedFile::release_pages): a reader
  // of a recording of gigabytes calls it every kReleaseEvery bytes of records consumed, and its
  // resident size stays bounded; records stay valid (their bytes come back from the page cache).
  // records() does so itself while it decodes.
  void release_pages() const;
  // How many bytes of records are read between two release_pages() calls: what the recording
  // adds to resident memory at most.
  static constexpr uint64_t kReleaseEvery = 32u << 20;
  // Recordings whose data is smaller stay resident: rereading released pages costs ~10% of the
  // time of a pass, for memory such a file bounds anyway.
  static constexpr uint64_t kReleaseAbove = 128u << 20;

  // The attribute a sample's id belongs to (the only one when there is one).
  const EventAttr* attr_for_id(uint64_t id) const;

private:
  PerfData() = default;
  static Result<PerfData> parse(PerfData d);
  // The attributes' id layout, once they are all known (parse, read_stream).
  static Result<PerfData> index_attributes(PerfData d);
  Status parse_file_header();
  Status parse_features(uint64_t features_offset, const uint64_t (&bits)[4]);
  Status parse_attr(std::span<const uint8_t> bytes, uint64_t offset, EventAttr& out) const;
  Status parse_build_ids(std::span<const uint8_t> bytes, uint64_t offset);
  // Pipe mode: applies the attr, build-id and feature records of bytes()[pos, end); stops at a
  // record cut by `end` or malformed (the Reader reports it, after the records before it);
  // `streaming`: also at the first record the kernel wrote. `pos` is left where it stopped.
  Status parse_pipe_header_records(uint64_t& pos, uint64_t end, bool streaming);
  Error error_at(uint64_t offset, std::string message) const;
  static constexpr uint64_t kInFile = ~uint64_t(0);
  // Bytes records are decoded from: `bytes[0]` is at `base` in the file (kInFile: decompressed
  // data, whose compressed record is at `compressed_at`), records keep `storage` alive.
  struct Window {
    std::span<const uint8_t> bytes;
    uint64_t base = 0;
    uint64_t compressed_at = kInFile;
    std::shared_ptr<const std::vector<uint8_t>> storage;
    bool more_coming = false; // a pipe's: a record cut by the end waits for more bytes
  };
  // Decodes records of w.bytes[pos, end) into `out` until `budget` were appended or a record is
  // cut by `end` (an error unless w.more_coming; then pos stays at it); `pos` moves past what
  // was decoded; `skip`: payload bytes of the last record beyond `end` (a pipe's). `zstd`: where
  // compressed records decompress (null inside decompressed data).
  Status decode_records(const Window& w, size_t& pos, size_t end, size_t budget,
                        std::vector<Record>& out, ZstdStream* zstd, uint64_t& skip) const;
  // Decompresses a compressed record's payload into z's chunk (its whole records).
  Status decompress(ZstdStream& z, std::span<const uint8_t> payload, uint64_t at) const;
  std::span<const uint8_t> bytes() const;

  std::string name_;
  std::unique_ptr<MappedFile> file_; // open(); from_bytes keeps `owned_`
  std::shared_ptr<std::vector<uint8_t>> owned_;
  int stream_fd_ = -1; // read_stream: where the records after owned_ come from
  bool pipe_ = false;
  uint64_t data_offset_ = 0, data_size_ = 0;
  std::vector<EventAttr> attrs_;
  std::unordered_map<uint64_t, size_t> attr_of_id_; // sample id -> index in attrs_
  std::vector<BuildIdEntry> build_ids_;
  std::string hostname_, os_release_, arch_;
  std::optional<Error> damage_;
  // Every attribute has the same sample_type layout up to the id, so a sample's attribute can
  // be found from the id (PERF_SAMPLE_IDENTIFIER first, else at a fixed position).
  int id_position_ = -1;          // u64 index of the id in a sample, -1: none
  int id_position_from_end_ = -1; // u64 index from the end of a sample_id trailer
};

} // namespace ehelf::perf
