#include "perf/pprof.hpp"

#include <map>
#include <optional>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <zlib.h>

#include "perf/folded.hpp"

namespace ehelf::perf {
namespace {

using google::protobuf::io::CodedOutputStream;

// Protocol buffer wire types.
constexpr uint32_t kVarint = 0, kBytes = 2;

// One message's fields, encoded into a string (messages nest as length-delimited bytes).
class Message {
public:
  void varint(uint32_t field, uint64_t v) {
    if (v == 0) return; // proto3: zero is the default, not written
    tag(field, kVarint);
    put_varint(v);
  }
  void boolean(uint32_t field, bool v) { varint(field, v ? 1 : 0); }
  void bytes(uint32_t field, std::string_view b) {
    tag(field, kBytes);
    put_varint(b.size());
    out_.append(b);
  }
  void message(uint32_t field, const Message& m) { bytes(field, m.out_); }
  // A packed repeated varint field.
  void packed(uint32_t field, const std::vector<uint64_t>& values) {
    if (values.empty()) return;
    Message inner;
    for (uint64_t v : values)
      inner.put_varint(v);
    bytes(field, inner.out_);
  }
  const std::string& data() const { return out_; }

private:
  void tag(uint32_t field, uint32_t wire) { put_varint((uint64_t(field) << 3) | wire); }
  void put_varint(uint64_t v) {
    uint8_t buf[10]; // a varint of 64 bits takes at most 10 bytes
    uint8_t* end = CodedOutputStream::WriteVarint64ToArray(v, buf);
    out_.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
  }
  std::string out_;
};

// Profile.string_table: index 0 is "", as the format requires.
class Strings {
public:
  uint64_t operator()(const std::string& s) {
    auto [it, added] = index_.try_emplace(s, table_.size());
    if (added) table_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& table() const { return table_; }

private:
  std::vector<std::string> table_{""};
  std::map<std::string, uint64_t> index_{{"", 0}};
};

// `data` in the gzip format (RFC 1952), at zlib's default level, as `pprof` writes its profiles.
// zlib directly rather than libprotobuf's GzipOutputStream: that one needs the full libprotobuf,
// whose loading and relocation cost every ehelf command ~1 ms at start-up; the varints above use
// only libprotobuf-lite's inline encoder.
std::optional<std::string> gzip(std::string_view data) {
  if (data.size() > UINT32_MAX / 2) return std::nullopt; // zlib counts in 32 bits
  z_stream z{};
  constexpr int kGzipWindow = 15 + 16; // 32 KiB window, gzip header and trailer
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return std::nullopt;
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&z, Z_FINISH); // the bound fits the whole stream: one call
  out.resize(z.total_out);
  deflateEnd(&z);
  if (status != Z_STREAM_END) return std::nullopt;
  return out;
}

} // namespace

Status write_pprof(std::ostream& out, const std::vector<CountedStack>& stacks,
                   const PprofOptions& options) {
  Strings str;
  Message profile;
  auto value_type = [&](const std::string& type, const std::string& unit) {
    Message m;
    m.varint(1, str(type));
    m.varint(2, str(unit));
    return m;
  };
  profile.message(1, value_type("samples", "count"));
  profile.message(1, value_type(options.value_type, options.value_unit));

  // Mappings: a user frame's is its file's mapping in the process (FileMapping); frames without
  // one (the kernel's) share one per module name over the addresses sampled in it.
  struct MappingInfo {
    uint64_t id;
    FileMapping mapping;
  };
  std::map<std::pair<const FileMapping*, std::string>, MappingInfo> mappings;
  std::vector<const MappingInfo*> mappings_in_order;
  std::map<std::pair<std::string, std::string>, uint64_t> functions; // (name, module) -> id
  std::map<std::tuple<uint64_t, std::string, std::string, const FileMapping*>, uint64_t> locations;
  Message locations_out, functions_out;
  const uint64_t pid_key = str("pid"), tid_key = str("tid"), comm_key = str("comm");
  for (const CountedStack& c : stacks) {
    std::vector<uint64_t> ids;
    for (const StackFrame& f : c.stack.frames) {
      const std::string name = frame_name(f);
      auto [loc, new_location] =
          locations.try_emplace({f.pc, name, f.module, f.mapping}, locations.size() + 1);
      ids.push_back(loc->second);
      if (!new_location) continue;
      uint64_t mapping_id = 0;
      const FileMapping& kernel = options.kernel;
      const FileMapping* known = f.mapping ? f.mapping
                                 : kernel.end > kernel.start && f.module == kernel.path &&
                                         f.pc >= kernel.start && f.pc < kernel.end
                                     ? &kernel
                                     : nullptr;
      if (known || !f.module.empty()) {
        auto [m, added] = mappings.try_emplace({known, known ? "" : f.module},
                                               MappingInfo{mappings.size() + 1, {}});
        FileMapping& fm = m->second.mapping;
        if (added) {
          mappings_in_order.push_back(&m->second);
          if (known) {
            fm = *known;
          } else {
            fm.path = f.module;
            fm.start = f.pc;
          }
        }
        if (!known) {
          fm.start = std::min(fm.start, f.pc);
          fm.end = std::max(fm.end, f.pc + 1);
        }
        mapping_id = m->second.id;
      }
      auto [fn, new_function] = functions.try_emplace({name, f.module}, functions.size() + 1);
      if (new_function) {
        Message m;
        m.varint(1, fn->second);
        m.varint(2, str(name));
        m.varint(3, str(name));
        m.varint(4, str(f.module));
        functions_out.message(5, m);
      }
      Message line;
      line.varint(1, fn->second);
      Message l;
      l.varint(1, loc->second);
      l.varint(2, mapping_id);
      l.varint(3, f.pc);
      l.message(4, line);
      locations_out.message(4, l);
    }
    Message sample;
    sample.packed(1, ids);
    sample.packed(2, {c.samples, c.period});
    auto label_num = [&](uint64_t key, uint64_t num) {
      Message m;
      m.varint(1, key);
      m.varint(3, num);
      sample.message(3, m);
    };
    label_num(pid_key, c.stack.pid);
    label_num(tid_key, c.stack.tid);
    Message comm;
    comm.varint(1, comm_key);
    comm.varint(2, str(c.stack.comm));
    sample.message(3, comm);
    profile.message(2, sample);
  }
  for (const MappingInfo* m : mappings_in_order) {
    Message out;
    out.varint(1, m->id);
    out.varint(2, m->mapping.start);
    out.varint(3, m->mapping.end);
    out.varint(4, m->mapping.offset);
    out.varint(5, str(m->mapping.path));
    out.varint(6, str(m->mapping.build_id));
    out.boolean(7, true); // has_functions: names are resolved
    profile.message(3, out);
  }
  std::string body = profile.data() + locations_out.data() + functions_out.data();
  Message tail;
  tail.varint(9, static_cast<uint64_t>(options.time_nanos));
  tail.varint(10, static_cast<uint64_t>(options.duration_nanos));
  tail.message(11, value_type(options.value_type, options.value_unit));
  tail.varint(12, static_cast<uint64_t>(options.period));
  Message strings; // written last: every string above is in it by now
  for (const std::string& s : str.table())
    strings.bytes(6, s);
  body += strings.data() + tail.data();

  const std::optional<std::string> zipped = gzip(body);
  if (!zipped) return Error::plain("cannot compress the profile");
  out.write(zipped->data(), static_cast<std::streamsize>(zipped->size()));
  return Ok{};
}

} // namespace ehelf::perf
