// check::TraceWriter, check::TraceReader: the recorded path of a check (format in trace.hpp).
#include "check/trace.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fmt/format.h>

#include "model/registers.hpp"
#include "support/byte_writer.hpp"

namespace ehelf::check {
namespace {

constexpr char kMagic[8] = {'E', 'H', 'E', 'L', 'F', 'T', 'R', 'C'};
enum Tag : uint8_t { kModule = 1, kThread = 2, kFrame = 3, kMemory = 4, kStep = 5, kEnd = 6 };

// Bounds a reader holds every field to (hostile traces).
constexpr uint64_t kMaxPath = 4096;
constexpr uint64_t kMaxBuildId = 64;
constexpr uint64_t kMaxImage = uint64_t(1) << 20;
constexpr size_t kMaxModules = 1 << 16;
constexpr size_t kMaxThreads = 1 << 16;
constexpr size_t kMaxReads = 64; // memory words per step
constexpr uint64_t kMaxCounters = 64;
constexpr unsigned kFrameMaskBits = 14;
constexpr unsigned kDeltaRegs = 16; // DWARF 0-15: rip is the module's bias + SVMA
constexpr uint32_t kKnownMaskLimit = uint32_t(1) << x86_64::kGeneralRegs;
constexpr size_t kFlushAt = size_t(1) << 20;

// The frame fields the row check reads, in the trace's order: slot, return address, entries,
// saves. Bit 0 slot, 1 return address, 2+i entry i, 8+i saves of i.
unsigned frame_changes(const ShadowFrame& was, const ShadowFrame& now) {
  unsigned mask = 0;
  if (now.slot != was.slot) mask |= 1;
  if (now.return_address != was.return_address) mask |= 2;
  for (unsigned i = 0; i < kCalleeSaved.size(); ++i) {
    if (now.entry[i] != was.entry[i]) mask |= 4u << i;
    if (now.save_count[i] != was.save_count[i] ||
        !std::equal(now.saves[i].begin(), now.saves[i].begin() + now.save_count[i],
                    was.saves[i].begin()))
      mask |= 0x100u << i;
  }
  return mask;
}

} // namespace

// ---- writing ----

Result<std::unique_ptr<TraceWriter>> TraceWriter::create(const std::string& path) {
  auto out = OutputFile::create(path);
  if (!out) return std::move(out).error();
  std::unique_ptr<TraceWriter> w(new TraceWriter(std::move(*out)));
  w->buffer_.reserve(kFlushAt + 4096);
  for (char c : kMagic)
    w->buffer_.push_back(uint8_t(c));
  w->buffer_.push_back(uint8_t(kTraceVersion));
  w->buffer_.push_back(uint8_t(kTraceVersion >> 8));
  return w;
}

void TraceWriter::flush() {
  // A failure is kept by the output and reported by finish().
  if (!buffer_.empty())
    (void)out_.write({reinterpret_cast<const char*>(buffer_.data()), buffer_.size()});
  buffer_.clear();
}

uint32_t TraceWriter::module(const TraceModule& m) {
  auto [it, added] =
      modules_.try_emplace(fmt::format("{:x} {}", m.bias, m.path), uint32_t(modules_.size()));
  if (!added) return it->second;
  buffer_.push_back(kModule);
  put_uleb(buffer_, it->second);
  put_uleb(buffer_, m.path.size());
  buffer_.insert(buffer_.end(), m.path.begin(), m.path.end());
  put_uleb(buffer_, m.build_id.size());
  buffer_.insert(buffer_.end(), m.build_id.begin(), m.build_id.end());
  put_uleb(buffer_, m.bias);
  put_uleb(buffer_, m.image.size());
  buffer_.insert(buffer_.end(), m.image.begin(), m.image.end());
  return it->second;
}

void TraceWriter::step(pid_t tid, uint32_t module, uint64_t svma, const RegisterState& regs,
                       const ShadowFrame& frame, std::span<const MemoryWord> reads) {
  if (tid != current_) {
    buffer_.push_back(kThread);
    put_uleb(buffer_, uint64_t(tid));
    current_ = tid;
  }
  TraceThreadState& t = threads_[tid];
  if (unsigned mask = frame_changes(t.frame, frame)) {
    buffer_.push_back(kFrame);
    put_uleb(buffer_, mask);
    if (mask & 1) put_sleb(buffer_, int64_t(frame.slot - t.frame.slot));
    if (mask & 2) put_sleb(buffer_, int64_t(frame.return_address - t.frame.return_address));
    for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
      if (mask & (4u << i)) put_sleb(buffer_, int64_t(frame.entry[i] - t.frame.entry[i]));
    for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
      if (mask & (0x100u << i)) {
        put_uleb(buffer_, frame.save_count[i]);
        for (unsigned k = 0; k < frame.save_count[i]; ++k)
          put_sleb(buffer_, int64_t(frame.saves[i][k] - frame.slot));
      }
    t.frame = frame;
  }
  for (const MemoryWord& w : reads.first(std::min(reads.size(), kMaxReads))) {
    buffer_.push_back(kMemory);
    put_uleb(buffer_, w.address);
    put_uleb(buffer_, w.size);
    for (unsigned k = 0; k < w.size; ++k)
      buffer_.push_back(uint8_t(w.value >> (8 * k)));
  }
  buffer_.push_back(kStep);
  const uint32_t known = regs.valid & (kKnownMaskLimit - 1);
  const unsigned flags = (module != t.module ? 1u : 0u) | (known != t.regs.valid ? 2u : 0u);
  put_uleb(buffer_, flags);
  if (flags & 1) put_uleb(buffer_, module);
  if (flags & 2) put_uleb(buffer_, known);
  put_sleb(buffer_, int64_t(svma - t.svma));
  unsigned changed = 0;
  for (unsigned r = 0; r < kDeltaRegs; ++r)
    if (regs.has(r) && regs.get(r) != t.regs.get(r)) changed |= 1u << r;
  put_uleb(buffer_, changed);
  for (unsigned r = 0; r < kDeltaRegs; ++r)
    if (changed & (1u << r)) {
      put_sleb(buffer_, int64_t(regs.get(r) - t.regs.get(r)));
      t.regs.value[r] = regs.get(r);
    }
  t.regs.valid = known;
  t.module = module;
  t.svma = svma;
  if (buffer_.size() >= kFlushAt) flush();
}

Status TraceWriter::finish(const CheckSummary& s) {
  const uint64_t counters[] = {s.steps,
                               s.threads,
                               s.calls,
                               s.resyncs,
                               s.signals,
                               s.blocks,
                               s.block_mismatches,
                               s.unchecked_signal_steps,
                               uint64_t(s.seconds * 1e6),
                               s.step_limit,
                               s.exec_detached,
                               uint64_t(int64_t(s.exit_status) + 1),
                               s.processes,
                               s.execs};
  buffer_.push_back(kEnd);
  put_uleb(buffer_, std::size(counters));
  for (uint64_t c : counters)
    put_uleb(buffer_, c);
  flush();
  return out_.commit();
}

// ---- reading ----

Result<std::unique_ptr<TraceReader>> TraceReader::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return std::move(file).error();
  std::unique_ptr<TraceReader> r(new TraceReader((*file)->bytes(), path));
  r->file_ = std::move(*file);
  if (Status st = r->header(); !st.ok()) return std::move(st).error();
  return r;
}

Result<std::unique_ptr<TraceReader>> TraceReader::over(std::span<const uint8_t> bytes,
                                                       std::string name) {
  std::unique_ptr<TraceReader> r(new TraceReader(bytes, std::move(name)));
  if (Status st = r->header(); !st.ok()) return std::move(st).error();
  return r;
}

Error TraceReader::error(uint64_t offset, std::string message) const {
  Error e = Error::plain(std::move(message));
  e.file = name_;
  e.offset = offset;
  e.has_offset = true;
  return e;
}

Status TraceReader::header() {
  auto magic = in_.bytes(sizeof kMagic);
  if (!in_.ok() || std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0)
    return error(0, "not an ehelf check trace (no EHELFTRC header)");
  uint16_t version = in_.u16();
  if (!in_.ok()) return error(in_.failure_offset(), "truncated header");
  if (version != kTraceVersion)
    return error(
        8, fmt::format("trace version {} (this ehelf reads version {})", version, kTraceVersion));
  return Ok{};
}

Status TraceReader::read_module() {
  const uint64_t at = in_.offset();
  uint64_t index = in_.uleb();
  if (in_.ok() && index != modules_.size())
    return error(at, fmt::format("module index {} where {} comes next", index, modules_.size()));
  if (modules_.size() >= kMaxModules) return error(at, "more than 65536 modules");
  TraceModule m;
  m.record_offset = at - 1; // the tag's
  uint64_t len = in_.uleb();
  if (in_.ok() && (len == 0 || len > kMaxPath))
    return error(at, fmt::format("module path of {} bytes", len));
  auto path = in_.bytes(len);
  m.path.assign(reinterpret_cast<const char*>(path.data()), path.size());
  if (m.path.find('\0') != std::string::npos) return error(at, "module path holds a NUL byte");
  len = in_.uleb();
  if (in_.ok() && len > kMaxBuildId) return error(at, fmt::format("build id of {} bytes", len));
  auto id = in_.bytes(len);
  m.build_id.assign(id.begin(), id.end());
  m.bias = in_.uleb();
  len = in_.uleb();
  if (in_.ok() && len > kMaxImage) return error(at, fmt::format("module image of {} bytes", len));
  auto image = in_.bytes(len);
  m.image.assign(image.begin(), image.end());
  if (!in_.ok()) return error(in_.failure_offset(), "truncated module record");
  modules_.push_back(std::move(m));
  return Ok{};
}

Status TraceReader::read_frame() {
  const uint64_t at = in_.offset() - 1;
  if (!tid_) return error(at, "frame record before any thread record");
  ShadowFrame& f = threads_[tid_].frame;
  uint64_t mask = in_.uleb();
  if (in_.ok() && mask >> kFrameMaskBits) return error(at, fmt::format("frame mask {:#x}", mask));
  if (mask & 1) f.slot += uint64_t(in_.sleb());
  if (mask & 2) f.return_address += uint64_t(in_.sleb());
  for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
    if (mask & (4u << i)) f.entry[i] += uint64_t(in_.sleb());
  for (unsigned i = 0; i < kCalleeSaved.size(); ++i)
    if (mask & (0x100u << i)) {
      uint64_t count = in_.uleb();
      if (in_.ok() && count > f.saves[i].size())
        return error(at, fmt::format("{} save slots for one register (at most 4)", count));
      f.save_count[i] = uint8_t(count);
      for (unsigned k = 0; k < count; ++k)
        f.saves[i][k] = f.slot + uint64_t(in_.sleb());
    }
  if (!in_.ok()) return error(in_.failure_offset(), "truncated frame record");
  return Ok{};
}

Status TraceReader::read_step() {
  const uint64_t at = in_.offset() - 1;
  if (!tid_) return error(at, "step record before any thread record");
  TraceThreadState& t = threads_[tid_];
  uint64_t flags = in_.uleb();
  if (in_.ok() && flags > 3) return error(at, fmt::format("step flags {:#x}", flags));
  if (flags & 1) {
    uint64_t module = in_.uleb();
    if (in_.ok() && module >= modules_.size())
      return error(at, fmt::format("module {} of {}", module, modules_.size()));
    t.module = uint32_t(module);
  }
  if (flags & 2) {
    uint64_t known = in_.uleb();
    if (in_.ok() && known >= kKnownMaskLimit)
      return error(at, fmt::format("register mask {:#x}", known));
    t.regs.valid = uint32_t(known);
  }
  if (in_.ok() && t.module >= modules_.size()) return error(at, "step before its module record");
  t.svma += uint64_t(in_.sleb());
  uint64_t changed = in_.uleb();
  if (in_.ok() && changed >> kDeltaRegs)
    return error(at, fmt::format("changed-register mask {:#x}", changed));
  for (unsigned r = 0; r < kDeltaRegs; ++r)
    if (changed & (1u << r)) t.regs.value[r] += uint64_t(in_.sleb());
  if (!in_.ok()) return error(in_.failure_offset(), "truncated step record");
  t.regs.value[x86_64::RIP] = modules_[t.module].bias + t.svma;
  step_ = &t;
  reads_.swap(pending_);
  pending_.clear();
  return Ok{};
}

Status TraceReader::read_end() {
  const uint64_t at = in_.offset() - 1;
  uint64_t count = in_.uleb();
  if (in_.ok() && count > kMaxCounters) return error(at, fmt::format("{} counters", count));
  uint64_t c[kMaxCounters] = {};
  for (uint64_t i = 0; i < count; ++i)
    c[i] = in_.uleb();
  if (!in_.ok()) return error(in_.failure_offset(), "truncated end record");
  if (!in_.at_end()) return error(in_.offset(), "bytes after the end record");
  CheckSummary& s = recorded_;
  s.steps = c[0];
  s.threads = c[1];
  s.calls = c[2];
  s.resyncs = c[3];
  s.signals = c[4];
  s.blocks = c[5];
  s.block_mismatches = c[6];
  s.unchecked_signal_steps = c[7];
  s.seconds = double(c[8]) / 1e6;
  s.step_limit = c[9] != 0;
  s.exec_detached = c[10] != 0;
  s.exit_status = c[11] > 0 && c[11] - 1 <= uint64_t(INT_MAX) ? int(c[11] - 1) : -1;
  s.processes = c[12];
  s.execs = c[13];
  return Ok{};
}

Result<TraceReader::Event> TraceReader::next() {
  for (;;) {
    const uint64_t at = in_.offset();
    if (in_.at_end()) return error(at, "the trace ends without its end record (truncated?)");
    const uint8_t tag = in_.u8();
    Status st = Ok{};
    switch (tag) {
    case kModule:
      if (st = read_module(); st.ok()) return Event::module;
      break;
    case kThread: {
      uint64_t tid = in_.uleb();
      if (!in_.ok()) return error(in_.failure_offset(), "truncated thread record");
      if (tid == 0 || tid > uint64_t(INT_MAX)) return error(at, fmt::format("thread id {}", tid));
      if (!threads_.count(pid_t(tid)) && threads_.size() >= kMaxThreads)
        return error(at, "more than 65536 threads");
      tid_ = pid_t(tid);
      threads_.try_emplace(tid_);
      continue;
    }
    case kFrame:
      st = read_frame();
      if (st.ok()) continue;
      break;
    case kMemory: {
      MemoryWord w;
      w.address = in_.uleb();
      uint64_t size = in_.uleb();
      if (in_.ok() && size > 8) return error(at, fmt::format("memory word of {} bytes", size));
      if (pending_.size() >= kMaxReads) return error(at, "more than 64 memory words for a step");
      w.size = uint8_t(size);
      for (unsigned k = 0; k < size; ++k)
        w.value |= uint64_t(in_.u8()) << (8 * k);
      if (!in_.ok()) return error(in_.failure_offset(), "truncated memory record");
      pending_.push_back(w);
      continue;
    }
    case kStep:
      if (st = read_step(); st.ok()) return Event::step;
      break;
    case kEnd:
      if (st = read_end(); st.ok()) return Event::end;
      break;
    default:
      return error(at, fmt::format("unknown record tag {:#x}", tag));
    }
    return std::move(st).error();
  }
}

// ---- memory ----

bool RecordingMemory::read(uint64_t addr, void* out, size_t size) {
  const bool ok = inner_.read(addr, out, size);
  if (size <= 8 && reads_.size() < kMaxReads) {
    MemoryWord w{addr, uint8_t(ok ? size : 0), 0};
    if (ok) std::memcpy(&w.value, out, size);
    reads_.push_back(w);
  }
  return ok;
}

bool RecordedMemory::read(uint64_t addr, void* out, size_t size) {
  if (size == 0) return true;
  for (const MemoryWord& w : words_) {
    if (w.size == 0 && w.address == addr) return false; // unreadable when recorded
    if (w.size && addr >= w.address && size <= w.size && addr - w.address <= w.size - size) {
      uint64_t v = w.value >> (8 * (addr - w.address));
      std::memcpy(out, &v, size);
      return true;
    }
  }
  unknown = true;
  return false;
}

} // namespace ehelf::check
