// Decoding one perf record's body (PERF_RECORD_*, a sample in PERF_SAMPLE_* order), for the
// file reader (perf_data.cpp) and the live ring (record/recorder.cpp) alike.
#include <bit>
#include <string>

#include <fmt/format.h>

#include "perf/perf_bytes.hpp"
#include "perf/perf_data.hpp"

namespace ehelf::perf {

namespace {

// Decodes a sample's body (after the header) in PERF_SAMPLE_* order.
bool decode_sample(ByteCursor& c, const EventAttr& a, SampleRecord& s, std::string& why) {
  const uint64_t st = a.sample_type;
  s.attr = &a;
  if (st & sample::kIdentifier) s.id = c.u64();
  if (st & sample::kIp) s.ip = c.u64();
  if (st & sample::kTid) {
    s.pid = c.u32();
    s.tid = c.u32();
  }
  if (st & sample::kTime) s.time = c.u64();
  if (st & sample::kAddr) s.addr = c.u64();
  if (st & sample::kId) s.id = c.u64();
  if (st & sample::kStreamId) s.stream_id = c.u64();
  if (st & sample::kCpu) {
    s.cpu = c.u32();
    c.u32();
  }
  if (st & sample::kPeriod) s.period = c.u64();
  if (st & sample::kRead) {
    const uint64_t rf = a.read_format;
    const uint64_t per_value = 1 + ((rf & kFormatId) ? 1 : 0) + ((rf & kFormatLost) ? 1 : 0);
    const uint64_t times =
        ((rf & kFormatTotalTimeEnabled) ? 1 : 0) + ((rf & kFormatTotalTimeRunning) ? 1 : 0);
    if (rf & kFormatGroup) {
      const uint64_t nr = c.u64();
      if (nr > c.remaining() / 8 / per_value) {
        why = fmt::format("read group of {} values does not fit", nr);
        return false;
      }
      c.skip(8 * (times + nr * per_value));
    } else {
      c.skip(8 * (times + per_value));
    }
  }
  if (st & sample::kCallchain) {
    const uint64_t nr = c.u64();
    if (nr > c.remaining() / 8) {
      why = fmt::format("callchain of {} entries does not fit", nr);
      return false;
    }
    s.callchain = c.bytes(8 * nr);
  }
  if (st & sample::kRaw) c.bytes(c.u32());
  if (st & sample::kBranchStack) {
    const uint64_t nr = c.u64();
    if (a.branch_sample_type & kBranchHwIndex) c.u64();
    if (nr > c.remaining() / 24) {
      why = fmt::format("branch stack of {} entries does not fit", nr);
      return false;
    }
    c.skip(24 * nr);
  }
  if (st & sample::kRegsUser) {
    s.regs_abi = c.u64();
    s.regs_mask = a.sample_regs_user;
    if (s.regs_abi) s.regs = c.bytes(8 * uint64_t(std::popcount(a.sample_regs_user)));
  }
  if (st & sample::kStackUser) {
    const uint64_t size = c.u64();
    if (size > c.remaining()) {
      why = fmt::format("user stack of {} bytes does not fit", size);
      return false;
    }
    s.stack = c.bytes(size);
    if (size) {
      s.stack_dyn_size = c.u64();
      if (s.stack_dyn_size > size) s.stack_dyn_size = size; // never more than was copied
    }
  }
  if (st & (sample::kWeight | sample::kWeightStruct)) c.u64();
  if (st & sample::kDataSrc) c.u64();
  if (st & sample::kTransaction) c.u64();
  if (st & sample::kRegsIntr) {
    if (c.u64()) c.skip(8 * uint64_t(std::popcount(a.sample_regs_intr)));
  }
  if (st & sample::kPhysAddr) c.u64();
  if (st & sample::kCgroup) c.u64();
  if (st & sample::kDataPageSize) c.u64();
  if (st & sample::kCodePageSize) c.u64();
  if (st & sample::kAux) c.bytes(c.u64());
  if (!c.ok()) {
    why = "sample is shorter than its sample_type says";
    return false;
  }
  return true;
}

} // namespace

bool decode_kernel_record(std::span<const uint8_t> body, uint64_t body_offset, const EventAttr& a,
                          Record& r, std::string& why) {
  ByteCursor c(body, body_offset);
  if (r.type == record_type::kSample) {
    SampleRecord s;
    if (!decode_sample(c, a, s, why)) return false;
    r.time = s.time;
    r.body = s;
    return true;
  }
  size_t trailer = 0;
  if (a.sample_id_all()) {
    TrailerLayout t = trailer_layout(a);
    trailer = 8 * t.words;
    if (trailer > body.size()) {
      why = "record too short for its sample id";
      return false;
    }
    if (t.time_word >= 0)
      r.time = load_u64(body.data() + body.size() - trailer + 8 * size_t(t.time_word));
  }
  const size_t payload = body.size() - trailer;
  // Whether the fields read so far fit before the sample id trailer; `why` says what is short.
  auto complete = [&](const char* what) {
    if (c.ok() && c.pos() <= payload) return true;
    why = what;
    return false;
  };
  switch (r.type) {
  case record_type::kMmap:
  case record_type::kMmap2: {
    MmapRecord m;
    m.mmap2 = r.type == record_type::kMmap2;
    m.pid = c.u32();
    m.tid = c.u32();
    m.start = c.u64();
    m.len = c.u64();
    m.pgoff = c.u64();
    if (m.mmap2) {
      if (r.misc & kMiscMmapBuildId) {
        const uint8_t n = c.u8();
        c.skip(3);
        std::span<const uint8_t> id = c.bytes(20);
        if (c.ok()) m.build_id = id.first(std::min<size_t>(n, 20));
      } else {
        c.skip(24); // maj, min, ino, ino_generation
      }
      m.prot = c.u32();
      m.flags = c.u32();
    }
    if (c.ok() && c.pos() <= payload) m.filename = read_cstring(c, payload - c.pos());
    if (!complete("mmap record is truncated or its file name is not terminated")) return false;
    r.body = m;
    return true;
  }
  case record_type::kComm: {
    CommRecord cm;
    cm.pid = c.u32();
    cm.tid = c.u32();
    cm.exec = (r.misc & kMiscCommExec) != 0;
    if (c.ok() && c.pos() <= payload) cm.comm = read_cstring(c, payload - c.pos());
    if (!complete("comm record is truncated or its name is not terminated")) return false;
    r.body = cm;
    return true;
  }
  case record_type::kFork:
  case record_type::kExit: {
    TaskRecord t;
    t.pid = c.u32();
    t.ppid = c.u32();
    t.tid = c.u32();
    t.ptid = c.u32();
    t.time = c.u64();
    if (!complete("fork/exit record is truncated")) return false;
    if (!r.time) r.time = t.time;
    r.body = t;
    return true;
  }
  case record_type::kLost: {
    LostRecord l;
    l.id = c.u64();
    l.lost = c.u64();
    if (!complete("lost record is truncated")) return false;
    r.body = l;
    return true;
  }
  case record_type::kLostSamples: {
    LostRecord l;
    l.lost = c.u64();
    if (!complete("lost samples record is truncated")) return false;
    r.body = l;
    return true;
  }
  default:
    return true;
  }
}

} // namespace ehelf::perf
