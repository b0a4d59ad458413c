#include "perf/perf_data.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>
#include <unordered_map>
#include <zstd.h>

#include "perf/perf_bytes.hpp"
#include "support/byte_cursor.hpp"
#include "support/read_fully.hpp"

namespace ehelf::perf {

namespace {

constexpr uint64_t kMagic = 0x32454c4946524550ULL;        // "PERFILE2"
constexpr uint64_t kMagicSwapped = 0x50455246494c4532ULL; // the same from a big-endian host
constexpr uint64_t kFileHeaderSize = 104;
constexpr uint64_t kPipeHeaderSize = 16;
constexpr uint64_t kAttrSizeVer0 = 64;
constexpr size_t kRecordHeaderSize = 8;
constexpr size_t kMaxRecords = size_t(1) << 24; // 16M records, ~3 GB of Record

// Header feature bits.
constexpr unsigned kFeatBuildId = 2, kFeatHostname = 3, kFeatOsRelease = 4, kFeatArch = 6,
                   kFeatEventDesc = 12;

// perf's string feature: u32 length, then that many bytes (NUL padded).
std::string read_feature_string(ByteCursor& c) {
  const uint32_t len = c.u32();
  if (!c.ok() || len > c.remaining()) {
    c.fail();
    return {};
  }
  std::string_view s = read_cstring(c, len);
  if (!c.ok()) { // no NUL: the whole length is the string
    return {};
  }
  return std::string(s);
}

} // namespace

uint64_t SampleRecord::callchain_at(size_t i) const {
  return load_u64(callchain.data() + 8 * i);
}

uint64_t SampleRecord::weight() const {
  if (attr == nullptr) return 1;
  return (attr->sample_type & sample::kPeriod) ? period : attr->fixed_period();
}

bool SampleRecord::reg(unsigned perf_reg, uint64_t& value) const {
  if (perf_reg >= 64 || !(regs_mask & (uint64_t(1) << perf_reg)) || regs_abi == 0) return false;
  const size_t index =
      static_cast<size_t>(std::popcount(regs_mask & ((uint64_t(1) << perf_reg) - 1)));
  if (8 * (index + 1) > regs.size()) return false;
  value = load_u64(regs.data() + 8 * index);
  return true;
}

Error PerfData::error_at(uint64_t offset, std::string message) const {
  return std::move(Error::at("", offset, std::move(message))).in_file(name_);
}

std::span<const uint8_t> PerfData::bytes() const {
  if (file_) return file_->bytes();
  if (owned_) return {owned_->data(), owned_->size()};
  return {};
}

Result<PerfData> PerfData::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return std::move(file).error();
  PerfData d;
  d.name_ = path;
  d.file_ = std::move(*file);
  return parse(std::move(d));
}

Result<PerfData> PerfData::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  PerfData d;
  d.name_ = std::move(name);
  d.owned_ = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return parse(std::move(d));
}

Result<PerfData> PerfData::parse(PerfData d) {
  if (Status s = d.parse_file_header(); !s) return std::move(s).error();
  return index_attributes(std::move(d));
}

Result<PerfData> PerfData::index_attributes(PerfData d) {
  if (d.attrs_.empty()) return d.error_at(0, "no event attributes: not a perf record output");
  // Samples find their attribute by id: every attribute must put it at the same place.
  const EventAttr& first = d.attrs_.front();
  const uint64_t st = first.sample_type;
  if (st & sample::kIdentifier) {
    d.id_position_ = 0;
    d.id_position_from_end_ = 1;
  } else if (st & sample::kId) {
    d.id_position_ = ((st & sample::kIp) ? 1 : 0) + ((st & sample::kTid) ? 1 : 0) +
                     ((st & sample::kTime) ? 1 : 0) + ((st & sample::kAddr) ? 1 : 0);
    d.id_position_from_end_ =
        1 + ((st & sample::kCpu) ? 1 : 0) + ((st & sample::kStreamId) ? 1 : 0);
  }
  for (size_t i = 0; i < d.attrs_.size(); ++i)
    for (uint64_t id : d.attrs_[i].ids)
      d.attr_of_id_.emplace(id, i); // the first event with an id keeps it
  if (d.attrs_.size() > 1) {
    if (d.id_position_ < 0)
      return d.error_at(0, "several events whose samples carry no id: cannot tell them apart");
    for (const EventAttr& a : d.attrs_) {
      // Without PERF_SAMPLE_IDENTIFIER, the fields after the id in a sample_id trailer place
      // it from the end (id_position_from_end_): they must agree too, as perf requires.
      const uint64_t mask = sample::kIdentifier | sample::kId | sample::kIp | sample::kTid |
                            sample::kTime | sample::kAddr |
                            ((st & sample::kIdentifier) ? 0 : sample::kCpu | sample::kStreamId);
      if ((a.sample_type & mask) != (st & mask))
        return d.error_at(0, "events with different sample id layouts");
    }
  }
  return d;
}

Status PerfData::parse_file_header() {
  std::span<const uint8_t> all = bytes();
  ByteCursor c(all);
  const uint64_t magic = c.u64();
  const uint64_t header_size = c.u64();
  if (!c.ok()) return error_at(0, "truncated perf.data header");
  if (magic == kMagicSwapped) return error_at(0, "big-endian perf.data is not supported");
  if (magic != kMagic) return error_at(0, "not a perf.data file (no PERFILE2 magic)");
  if (header_size == kPipeHeaderSize) {
    pipe_ = true;
    data_offset_ = kPipeHeaderSize;
    data_size_ = all.size() - kPipeHeaderSize;
    uint64_t pos = kPipeHeaderSize;
    return parse_pipe_header_records(pos, all.size(), false);
  }
  if (header_size >= kFileHeaderSize && all.size() < kFileHeaderSize)
    return error_at(8, fmt::format("truncated perf.data header: {} bytes, the file has {}",
                                   header_size, all.size()));
  if (header_size < kFileHeaderSize || header_size > all.size())
    return error_at(8, fmt::format("header size {} is not a perf.data header's", header_size));
  const uint64_t attr_size = c.u64();
  const uint64_t attrs_offset = c.u64(), attrs_size = c.u64();
  data_offset_ = c.u64();
  data_size_ = c.u64();
  c.skip(16); // event_types: unused by perf since 2012
  uint64_t bits[4];
  for (uint64_t& b : bits)
    b = c.u64();
  if (!c.ok()) return error_at(c.failure_offset(), "truncated perf.data header");
  auto inside = [&](uint64_t off, uint64_t size) {
    return off <= all.size() && size <= all.size() - off;
  };
  // A damaged recording is read up to the damage (perf does the same), and says so.
  bool features_lost = false;
  if (data_offset_ >= kFileHeaderSize && data_offset_ < all.size() && data_size_ == 0) {
    // perf writes the sizes when it finishes: a recording killed with -9 has none.
    damage_ =
        error_at(48, fmt::format("data size field is 0 (perf record did not finish: killed?); "
                                 "reading the {:#x} bytes after the header",
                                 all.size() - data_offset_));
    data_size_ = all.size() - data_offset_;
    features_lost = true;
  } else if (!inside(data_offset_, data_size_) && data_offset_ >= kFileHeaderSize &&
             data_offset_ < all.size()) {
    damage_ = error_at(all.size(), fmt::format("the file ends inside its data section [{:#x}, "
                                               "+{:#x}) (truncated?); reading what is there",
                                               data_offset_, data_size_));
    data_size_ = all.size() - data_offset_;
    features_lost = true;
  }
  if (!inside(data_offset_, data_size_))
    return error_at(40,
                    fmt::format("data section [{:#x}, +{:#x}) is outside the file ({:#x} bytes)",
                                data_offset_, data_size_, all.size()));
  if (!inside(attrs_offset, attrs_size))
    return error_at(24, fmt::format("attribute section [{:#x}, +{:#x}) is outside the file",
                                    attrs_offset, attrs_size));
  if (attr_size < kAttrSizeVer0 + 16 || attrs_size % attr_size != 0)
    return error_at(16, fmt::format("attribute entry size {} does not fit the section size {}",
                                    attr_size, attrs_size));
  uint64_t ids_total = 0; // perf writes each event's ids apart: never more than the file holds
  for (uint64_t off = attrs_offset; off < attrs_offset + attrs_size; off += attr_size) {
    EventAttr a;
    if (Status s = parse_attr(all.subspan(off, attr_size - 16), off, a); !s) return s;
    ByteCursor ids_at(all.subspan(off + attr_size - 16, 16), off + attr_size - 16);
    const uint64_t ids_offset = ids_at.u64(), ids_size = ids_at.u64();
    if (!inside(ids_offset, ids_size) || ids_size % 8 != 0)
      return error_at(
          off + attr_size - 16,
          fmt::format("id array [{:#x}, +{:#x}) is outside the file", ids_offset, ids_size));
    ids_total += ids_size;
    if (ids_total > all.size())
      return error_at(
          off + attr_size - 16,
          fmt::format("id arrays of {:#x} bytes in all: more than the file holds", ids_total));
    for (uint64_t i = 0; i < ids_size; i += 8)
      a.ids.push_back(load_u64(all.data() + ids_offset + i));
    attrs_.push_back(std::move(a));
  }
  if (features_lost) return Ok{}; // build ids, hostname...: after the data, so gone too
  return parse_features(data_offset_ + data_size_, bits);
}

Status PerfData::parse_attr(std::span<const uint8_t> raw, uint64_t offset, EventAttr& a) const {
  if (raw.size() < kAttrSizeVer0)
    return error_at(offset, fmt::format("event attribute of {} bytes is shorter than the first "
                                        "version's 64",
                                        raw.size()));
  // Fields past the attribute's own size (an older perf) read as 0.
  uint8_t buf[128] = {};
  std::memcpy(buf, raw.data(), std::min<size_t>(raw.size(), sizeof buf));
  ByteCursor c(std::span<const uint8_t>(buf, sizeof buf));
  a.type = c.u32();
  c.u32(); // size
  a.config = c.u64();
  a.sample_period = c.u64();
  a.sample_type = c.u64();
  a.read_format = c.u64();
  a.flags = c.u64();
  c.skip(8 + 8 + 8); // wakeup_events, bp_type, config1, config2
  a.branch_sample_type = c.u64();
  a.sample_regs_user = c.u64();
  a.sample_stack_user = c.u32();
  c.u32(); // clockid
  a.sample_regs_intr = c.u64();
  return Ok{};
}

Status PerfData::parse_build_ids(std::span<const uint8_t> raw, uint64_t offset) {
  ByteCursor c(raw, offset);
  while (c.remaining() > 0) {
    const uint64_t at = c.offset();
    const size_t start = c.pos();
    c.u32(); // type
    const uint16_t misc = c.u16();
    const uint16_t size = c.u16();
    if (!c.ok() || size < kRecordHeaderSize + 4 + 24 || size - kRecordHeaderSize > c.remaining())
      return error_at(at, fmt::format("build-id entry of {} bytes does not fit", size));
    BuildIdEntry e;
    e.pid = c.u32();
    std::span<const uint8_t> id = c.bytes(24);
    size_t len = 20;
    if (misc & kMiscBuildIdSize) len = std::min<size_t>(id[20], 20);
    e.build_id.assign(id.begin(), id.begin() + static_cast<long>(len));
    e.kernel = (misc & 7) == static_cast<uint16_t>(CpuMode::Kernel);
    const size_t used = c.pos() - start;
    std::string_view name = read_cstring(c, size - used);
    if (!c.ok()) return error_at(at, "build-id entry's file name is not terminated");
    e.filename = std::string(name);
    build_ids_.push_back(std::move(e));
  }
  return Ok{};
}

Status PerfData::parse_features(uint64_t features_offset, const uint64_t (&bits)[4]) {
  std::span<const uint8_t> all = bytes();
  uint64_t at = features_offset;
  for (unsigned bit = 0; bit < 256; ++bit) {
    if (!((bits[bit / 64] >> (bit % 64)) & 1)) continue;
    if (at > all.size() || all.size() - at < 16)
      return error_at(at, fmt::format("feature {} has no section entry (file truncated)", bit));
    const uint64_t off = load_u64(all.data() + at), size = load_u64(all.data() + at + 8);
    if (off > all.size() || size > all.size() - off)
      return error_at(at, fmt::format("feature {} section [{:#x}, +{:#x}) is outside the file", bit,
                                      off, size));
    ByteCursor c(all.subspan(off, size), off);
    switch (bit) {
    case kFeatBuildId:
      if (Status s = parse_build_ids(all.subspan(off, size), off); !s) return s;
      break;
    case kFeatHostname:
      hostname_ = read_feature_string(c);
      break;
    case kFeatOsRelease:
      os_release_ = read_feature_string(c);
      break;
    case kFeatArch:
      arch_ = read_feature_string(c);
      break;
    case kFeatEventDesc: {
      const uint32_t nr = c.u32(), attr_size = c.u32();
      // The events by id, once: a description per event times every id would be quadratic.
      std::unordered_map<uint64_t, std::vector<EventAttr*>> by_id;
      for (EventAttr& a : attrs_)
        for (uint64_t id : a.ids)
          by_id[id].push_back(&a);
      for (uint32_t i = 0; i < nr && c.ok(); ++i) {
        c.skip(attr_size);
        const uint32_t nr_ids = c.u32();
        std::string name = read_feature_string(c);
        if (!c.ok() || uint64_t(nr_ids) * 8 > c.remaining()) break;
        std::vector<uint64_t> ids(nr_ids);
        for (uint64_t& id : ids)
          id = c.u64();
        // By id where the ids are known, else by position.
        bool named = false;
        if (auto it = ids.empty() ? by_id.end() : by_id.find(ids[0]); it != by_id.end())
          for (EventAttr* a : it->second) {
            a->name = name;
            named = true;
          }
        if (!named && nr == attrs_.size()) attrs_[i].name = name;
      }
      if (!c.ok()) return error_at(c.failure_offset(), "truncated event description feature");
      break;
    }
    default:
      break;
    }
    if (!c.ok()) return error_at(c.failure_offset(), fmt::format("truncated feature {}", bit));
    at += 16;
  }
  return Ok{};
}

Status PerfData::parse_pipe_header_records(uint64_t& pos, const uint64_t end, bool streaming) {
  std::span<const uint8_t> all = bytes();
  // A record cut or malformed stops the scan: reading the records says where, as damage after
  // the records before it (a stream may still bring the rest of a cut one).
  while (pos < end) {
    if (end - pos < kRecordHeaderSize) return Ok{};
    const uint32_t type = static_cast<uint32_t>(load_u64(all.data() + pos));
    uint16_t size;
    std::memcpy(&size, all.data() + pos + 6, 2);
    if (streaming && type < record_type::kHeaderAttr) return Ok{}; // the data begins
    if (size < kRecordHeaderSize || size > end - pos) return Ok{};
    std::span<const uint8_t> body = all.subspan(pos + kRecordHeaderSize, size - kRecordHeaderSize);
    uint64_t extra = 0; // bytes that follow the record outside its size
    if (type == record_type::kHeaderAttr) {
      EventAttr a;
      if (Status s = parse_attr(body, pos + kRecordHeaderSize, a); !s) return s;
      uint32_t own_size;
      std::memcpy(&own_size, body.data() + 4, 4);
      if (own_size < kAttrSizeVer0 || own_size > body.size())
        return error_at(pos + kRecordHeaderSize + 4,
                        fmt::format("attribute size {} does not fit its record", own_size));
      for (size_t i = own_size; i + 8 <= body.size(); i += 8)
        a.ids.push_back(load_u64(body.data() + i));
      attrs_.push_back(std::move(a));
    } else if (type == record_type::kHeaderBuildId) {
      if (Status s = parse_build_ids(all.subspan(pos, size), pos); !s) return s;
    } else if (type == record_type::kHeaderFeature) {
      if (body.size() >= 8) {
        const uint64_t bit = load_u64(body.data());
        ByteCursor c(body.subspan(8), pos + 16);
        if (bit == kFeatHostname)
          hostname_ = read_feature_string(c);
        else if (bit == kFeatOsRelease)
          os_release_ = read_feature_string(c);
        else if (bit == kFeatArch)
          arch_ = read_feature_string(c);
        else if (bit == kFeatBuildId) {
          if (Status s = parse_build_ids(body.subspan(8), pos + 16); !s) return s;
        }
      }
    } else if (type == record_type::kHeaderTracingData && body.size() >= 4) {
      uint32_t n;
      std::memcpy(&n, body.data(), 4);
      extra = n;
    } else if (type == record_type::kAuxtrace && body.size() >= 8) {
      extra = load_u64(body.data());
    }
    if (extra > end - pos - size) return Ok{};
    pos += size + extra;
  }
  return Ok{};
}

const EventAttr* PerfData::attr_for_id(uint64_t id) const {
  if (attrs_.size() == 1) return &attrs_.front();
  auto it = attr_of_id_.find(id);
  return it == attr_of_id_.end() ? nullptr : &attrs_[it->second];
}

Status PerfData::decode_records(const Window& w, size_t& pos, const size_t end, size_t budget,
                                std::vector<Record>& out, ZstdStream* zstd, uint64_t& skip) const {
  const EventAttr& first = attrs_.front();
  // Offsets in errors are the file's; inside decompressed data, the compressed record's.
  auto fail = [&](size_t at, std::string message) -> Status {
    if (w.compressed_at == kInFile) return error_at(w.base + at, std::move(message));
    return error_at(w.compressed_at,
                    fmt::format("decompressed byte {:#x}: {}", at, std::move(message)));
  };
  const std::span<const uint8_t> all = w.bytes;
  for (const size_t wanted = out.size() + budget; pos < end && out.size() < wanted;) {
    if (end - pos < kRecordHeaderSize) {
      if (w.more_coming) return Ok{};
      return fail(pos, "truncated record header");
    }
    Record r;
    r.offset = w.base + pos;
    std::memcpy(&r.type, all.data() + pos, 4);
    std::memcpy(&r.misc, all.data() + pos + 4, 2);
    uint16_t size;
    std::memcpy(&size, all.data() + pos + 6, 2);
    if (size < kRecordHeaderSize || size > end - pos) {
      if (w.more_coming && size >= kRecordHeaderSize) return Ok{};
      return fail(pos, fmt::format("record of {} bytes does not fit (type {})", size, r.type));
    }
    r.size = size;
    std::span<const uint8_t> body = all.subspan(pos + kRecordHeaderSize, size - kRecordHeaderSize);
    uint64_t extra = 0;
    bool keep = true;
    bool decompressed = false;
    if (r.type < record_type::kHeaderAttr) {
      // The kernel's records: samples find their attribute by id, the others by the id in their
      // sample_id trailer (with sample_id_all).
      const EventAttr* a = &first;
      if (attrs_.size() > 1 && r.type == record_type::kSample) {
        if (body.size() < 8 * size_t(id_position_ + 1))
          return fail(pos, "sample too short to hold its id");
        a = attr_for_id(load_u64(body.data() + 8 * size_t(id_position_)));
        if (!a) return fail(pos, "sample id matches no event");
      } else if (attrs_.size() > 1 && first.sample_id_all() && id_position_from_end_ > 0 &&
                 body.size() >= 8 * size_t(id_position_from_end_)) {
        const EventAttr* by_id =
            attr_for_id(load_u64(body.data() + body.size() - 8 * size_t(id_position_from_end_)));
        if (by_id) a = by_id;
      }
      std::string why;
      if (!decode_kernel_record(body, w.base + pos + kRecordHeaderSize, *a, r, why))
        return fail(pos, why);
    } else {
      switch (r.type) {
      case record_type::kHeaderAttr:
      case record_type::kHeaderBuildId:
      case record_type::kHeaderFeature:
      case 65:        // HEADER_EVENT_TYPE
        keep = false; // applied by the header parse (pipe mode)
        break;
      case record_type::kHeaderTracingData:
        if (body.size() >= 4) {
          uint32_t n;
          std::memcpy(&n, body.data(), 4);
          extra = n;
        }
        break;
      case record_type::kAuxtrace:
        if (body.size() >= 8) extra = load_u64(body.data());
        break;
      case record_type::kCompressed:
        if (!zstd) return fail(pos, "a compressed record inside compressed data");
        if (Status st = decompress(*zstd, body, w.base + pos); !st) return st;
        keep = false;
        decompressed = true;
        break;
      default:
        break;
      }
    }
    if (extra > end - pos - size) {
      if (!w.more_coming) return fail(pos, "record payload runs past the end");
      skip = extra - (end - pos - size); // read past in the stream
      extra = end - pos - size;
    }
    if (keep) {
      r.storage = w.storage;
      out.push_back(std::move(r));
    }
    pos += size + extra;
    // Its records come next, a batch at a time (Reader::next_batch): one compressed record can
    // hold millions of them.
    if (decompressed) return Ok{};
  }
  return Ok{};
}

// perf record -z: PERF_RECORD_COMPRESSED records hold one zstd stream of records, cut anywhere
// (a record may continue in the next compressed record).
struct PerfData::ZstdStream {
  ZSTD_DStream* stream = ZSTD_createDStream();
  std::vector<uint8_t> pending; // decompressed bytes not yet making a whole record
  uint64_t decoded = 0;         // decompressed bytes before pending[0]
  uint64_t total = 0;           // decompressed bytes in all
  // The whole records of the last compressed record, decoded from `chunk_pos` on as they are
  // asked for; the records given point into the chunk and keep it.
  std::shared_ptr<const std::vector<uint8_t>> chunk;
  size_t chunk_pos = 0;
  uint64_t chunk_at = 0; // the compressed record's offset
  bool has_records() const { return chunk && chunk_pos < chunk->size(); }
  ~ZstdStream() { ZSTD_freeDStream(stream); }
};

Status PerfData::decompress(ZstdStream& z, std::span<const uint8_t> payload, uint64_t at) const {
  // zstd expands at most ~32768:1; perf's chunks are one ring-buffer read (a few MB at most).
  constexpr size_t kMaxChunk = 64u << 20;
  constexpr uint64_t kMaxTotal = uint64_t(2) << 30;
  if (!z.stream) return error_at(at, "zstd: cannot create a decompression stream");
  ZSTD_inBuffer in{payload.data(), payload.size(), 0};
  size_t produced = 0;
  for (;;) {
    const size_t used = z.pending.size();
    z.pending.resize(used + ZSTD_DStreamOutSize());
    ZSTD_outBuffer o{z.pending.data() + used, z.pending.size() - used, 0};
    const size_t rc = ZSTD_decompressStream(z.stream, &o, &in);
    z.pending.resize(used + o.pos);
    if (ZSTD_isError(rc)) return error_at(at, fmt::format("zstd: {}", ZSTD_getErrorName(rc)));
    produced += o.pos;
    z.total += o.pos;
    if (produced > kMaxChunk) return error_at(at, "compressed record expands beyond 64 MiB");
    // Bounds the time a small file can make us spend, whatever memory its records hold.
    if (z.total > kMaxTotal)
      return error_at(at, "compressed records expand beyond 2 GiB in all: decompress with "
                          "`perf inject -i IN -o OUT` and read the result");
    if (in.pos == in.size && o.pos < o.size) break; // all input read, all output flushed
  }
  // The whole records decompressed so far, kept (records point into them); the rest waits.
  size_t whole = 0;
  while (z.pending.size() - whole >= kRecordHeaderSize) {
    uint16_t size;
    std::memcpy(&size, z.pending.data() + whole + 6, 2);
    if (size < kRecordHeaderSize)
      return error_at(
          at, fmt::format("decompressed byte {:#x}: record of {} bytes", z.decoded + whole, size));
    if (size > z.pending.size() - whole) break;
    whole += size;
  }
  z.chunk.reset();
  z.chunk_pos = 0;
  if (!whole) return Ok{};
  // The records point into the chunk and keep it: it goes with the last of them.
  z.chunk = std::make_shared<const std::vector<uint8_t>>(
      z.pending.begin(), z.pending.begin() + static_cast<long>(whole));
  z.chunk_at = at;
  z.pending.erase(z.pending.begin(), z.pending.begin() + static_cast<long>(whole));
  z.decoded += whole;
  return Ok{};
}

void PerfData::release_pages() const {
  if (file_ && data_size_ > kReleaseAbove) file_->release_pages(0, file_->bytes().size());
}

PerfData::Reader::Reader(const PerfData& data)
    : data_(&data), zstd_(std::make_unique<ZstdStream>()), chunk_(data.owned_),
      window_(data.bytes()), pos_(data.data_offset_), end_(data.data_offset_ + data.data_size_),
      released_(data.data_offset_) {}
PerfData::Reader::~Reader() = default;
PerfData::Reader::Reader(Reader&&) noexcept = default;

Status PerfData::Reader::next_batch(std::vector<Record>& out, bool& done) {
  done = false;
  const PerfData& d = *data_;
  const bool stream = d.stream_fd_ >= 0;
  const size_t before = out.size();
  for (;;) {
    uint64_t skip = 0;
    if (ZstdStream& z = *zstd_; z.has_records()) { // a compressed record's, before what follows
      Status s = d.decode_records(Window{*z.chunk, 0, z.chunk_at, z.chunk, false}, z.chunk_pos,
                                  z.chunk->size(), kBatch, out, nullptr, skip);
      if (!z.has_records()) z.chunk.reset();
      if (!s || out.size() != before) return s;
      continue;
    }
    Status s = d.decode_records(Window{window_, base_, kInFile, chunk_, stream}, pos_, end_, kBatch,
                                out, zstd_.get(), skip);
    skip_ += skip;
    if (!s) return s;
    if (zstd_->has_records() && out.size() == before) continue;
    // Decoding touches every page of the data: resident memory is bounded by releasing them.
    if (position() - released_ >= kReleaseEvery) {
      d.release_pages(); // the records decoded so far are read again from the page cache
      released_ = position();
    }
    // Short of records only at the end of the window, or at a record it cuts.
    if (out.size() != before) return Ok{};
    bool got_more = false;
    if (stream)
      if (Status r = refill(got_more); !r) return r;
    if (got_more) continue;
    // The end of the data: nothing may be left cut.
    if (skip_) return d.error_at(position(), "record payload runs past the end of the stream");
    if (pos_ != end_)
      return d.decode_records(Window{window_, base_, kInFile, chunk_, false}, pos_, end_, 1, out,
                              zstd_.get(), skip);
    // (A zstd frame left open at the end is normal: perf flushes its stream without ending it.)
    if (!zstd_->pending.empty())
      return d.error_at(position(), "compressed data ends inside a record");
    done = true;
    return Ok{};
  }
}

Status PerfData::Reader::refill(bool& got_more) {
  // Windows of 1 MiB: a record is at most 64 KiB.
  constexpr size_t kChunk = 1u << 20;
  auto next = std::make_shared<std::vector<uint8_t>>(window_.begin() + static_cast<long>(pos_),
                                                     window_.begin() + static_cast<long>(end_));
  const size_t kept = next->size();
  next->resize(kept + kChunk);
  size_t filled = kept;
  uint64_t skipped = 0;
  uint8_t scratch[1 << 16];
  while (filled < next->size()) {
    // A payload past a record (tracing data, AUX) is read and dropped.
    const bool skipping = skip_ > 0;
    const size_t want = skipping ? static_cast<size_t>(std::min<uint64_t>(skip_, sizeof scratch))
                                 : next->size() - filled;
    const ssize_t n =
        read_retrying(data_->stream_fd_, skipping ? scratch : next->data() + filled, want);
    if (n == 0) break;
    if (n < 0)
      return data_->error_at(base_ + end_ + skipped,
                             fmt::format("read failed: {}", std::strerror(errno)));
    if (skipping) {
      skip_ -= static_cast<uint64_t>(n);
      skipped += static_cast<uint64_t>(n);
    } else {
      filled += static_cast<size_t>(n);
    }
  }
  next->resize(filled);
  got_more = filled > kept;
  if (!got_more) return Ok{};
  base_ += pos_ + skipped;
  pos_ = 0;
  end_ = filled;
  window_ = *next;
  chunk_ = std::move(next);
  return Ok{};
}

Result<std::vector<Record>> PerfData::records(std::optional<Error>* damage) const {
  std::vector<Record> out;
  Reader reader(*this);
  for (bool done = false; !done;) {
    Status s = reader.next_batch(out, done);
    // A Record is ~20 times the smallest record: bounded, whatever the file claims.
    if (s && out.size() > kMaxRecords)
      s = error_at(out[kMaxRecords].offset,
                   fmt::format("more than {} records: not supported", kMaxRecords));
    if (s) continue;
    if (!damage) return std::move(s).error();
    *damage = std::move(s).error(); // the records before the damage stand
    if (out.size() > kMaxRecords) out.resize(kMaxRecords);
    return out;
  }
  return out;
}

Result<PerfData> PerfData::read_stream(int fd, std::string name) {
  PerfData d;
  d.name_ = std::move(name);
  d.owned_ = std::make_shared<std::vector<uint8_t>>();
  std::vector<uint8_t>& bytes = *d.owned_;
  // Appends what the next read gives; false at the end of the stream.
  auto read_some = [&]() -> Result<bool> {
    constexpr size_t kRead = 1 << 16;
    const size_t had = bytes.size();
    bytes.resize(had + kRead);
    const ssize_t n = read_retrying(fd, bytes.data() + had, kRead);
    bytes.resize(had + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0) return d.error_at(had, fmt::format("read failed: {}", std::strerror(errno)));
    return n > 0;
  };
  bool more = true;
  while (more && bytes.size() < kPipeHeaderSize) {
    auto r = read_some();
    if (!r) return std::move(r).error();
    more = *r;
  }
  uint64_t magic = 0, header_size = 0;
  if (bytes.size() >= kPipeHeaderSize) {
    std::memcpy(&magic, bytes.data(), 8);
    std::memcpy(&header_size, bytes.data() + 8, 8);
  }
  if (magic != kMagic || header_size != kPipeHeaderSize) {
    // A file's layout on a stream (`cat perf.data | ehelf perf`): its sections are found from
    // the header, so it is read whole, as a file would be mapped; bounded.
    constexpr uint64_t kMaxWhole = uint64_t(16) << 30;
    while (more) {
      if (bytes.size() > kMaxWhole)
        return d.error_at(bytes.size(), fmt::format("more than {} GiB of a perf.data file's "
                                                    "layout on the stream: give the file's name",
                                                    kMaxWhole >> 30));
      auto r = read_some();
      if (!r) return std::move(r).error();
      more = *r;
    }
    return parse(std::move(d));
  }
  // perf's pipe layout: the header records (attributes, features) come before the data and are
  // read whole; the records are left on the stream for a Reader.
  constexpr size_t kMaxHeaderBytes = 64u << 20; // tracing data can take megabytes
  d.pipe_ = true;
  d.data_offset_ = kPipeHeaderSize;
  for (uint64_t pos = kPipeHeaderSize;;) {
    if (Status s = d.parse_pipe_header_records(pos, bytes.size(), more); !s)
      return std::move(s).error();
    uint32_t type = record_type::kHeaderAttr;
    uint16_t size = kRecordHeaderSize;
    if (bytes.size() - pos >= kRecordHeaderSize) {
      std::memcpy(&type, bytes.data() + pos, 4);
      std::memcpy(&size, bytes.data() + pos + 6, 2);
    }
    // At the first kernel record, or at a malformed one (the Reader says where).
    if (!more || type < record_type::kHeaderAttr || size < kRecordHeaderSize) break;
    if (bytes.size() > kMaxHeaderBytes)
      return d.error_at(pos, fmt::format("more than {} MiB of header records before the first "
                                         "sample: not supported",
                                         kMaxHeaderBytes >> 20));
    auto r = read_some();
    if (!r) return std::move(r).error();
    more = *r;
  }
  d.data_size_ = bytes.size() - kPipeHeaderSize;
  if (more) d.stream_fd_ = fd;
  return index_attributes(std::move(d));
}

} // namespace ehelf::perf
