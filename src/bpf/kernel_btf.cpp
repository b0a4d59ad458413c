#include "bpf/kernel_btf.hpp"

#include <bpf/btf.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "support/byte_cursor.hpp"
#include "support/read_fully.hpp"

namespace ehelf::bpf {

namespace {

constexpr uint16_t kMagic = 0xeb9f;
constexpr size_t kTypeHeader = 12; // name_off, info, size or type
constexpr uint32_t kModifierLimit = 32;
constexpr int kNestingLimit = 8; // anonymous members inside anonymous members, nested structs
constexpr uint32_t kMemberBudget = 1 << 16;

// Bytes that follow a type's header, by kind (linux/btf.h); nullopt: a kind this reader does not
// know, which it cannot step over.
std::optional<uint64_t> extra_bytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
  case 1:
    return 4; // INT: encoding
  case 2:
  case 7:
  case 8:
  case 9: // PTR, FWD, TYPEDEF, VOLATILE
  case 10:
  case 11:
  case 12:
  case 16: // CONST, RESTRICT, FUNC, FLOAT
  case 18: // TYPE_TAG
    return 0;
  case 3:
    return 12; // ARRAY
  case 4:
  case 5:
    return uint64_t(vlen) * 12; // STRUCT, UNION: members
  case 6:
    return uint64_t(vlen) * 8; // ENUM
  case 13:
    return uint64_t(vlen) * 8; // FUNC_PROTO: parameters
  case 14:
    return 4; // VAR
  case 15:
    return uint64_t(vlen) * 12; // DATASEC
  case 17:
    return 4; // DECL_TAG
  case 19:
    return uint64_t(vlen) * 12; // ENUM64
  default:
    return std::nullopt;
  }
}

} // namespace

Result<KernelBtf> KernelBtf::parse(std::span<const uint8_t> bytes) {
  ByteCursor header(bytes);
  const uint16_t magic = header.u16();
  const uint8_t version = header.u8();
  header.u8(); // flags
  const uint32_t header_length = header.u32();
  const uint32_t type_offset = header.u32();
  const uint32_t type_length = header.u32();
  const uint32_t string_offset = header.u32();
  const uint32_t string_length = header.u32();
  if (!header.ok()) return Error::at("BTF", header.failure_offset(), "header cut short");
  if (magic != kMagic) return Error::at("BTF", 0, fmt::format("bad magic {:#x}", magic));
  if (version != 1) return Error::at("BTF", 2, fmt::format("version {} not known", version));
  auto section = [&](uint32_t offset, uint32_t length, std::span<const uint8_t>& out) -> bool {
    const uint64_t start = uint64_t(header_length) + offset;
    if (header_length < 24 || start > bytes.size() || length > bytes.size() - start) return false;
    out = bytes.subspan(start, length);
    return true;
  };
  KernelBtf btf;
  if (!section(type_offset, type_length, btf.types_))
    return Error::at("BTF", 8, "type section outside the data");
  if (!section(string_offset, string_length, btf.strings_))
    return Error::at("BTF", 16, "string section outside the data");
  if (btf.strings_.empty() || btf.strings_.back() != 0)
    return Error::at("BTF", uint64_t(header_length) + string_offset, "strings not terminated");
  ByteCursor types(btf.types_, uint64_t(header_length) + type_offset);
  btf.offsets_.reserve(btf.types_.size() / 16);
  while (!types.at_end()) {
    const size_t at = types.pos();
    const uint32_t name_offset = types.u32();
    const uint32_t info = types.u32();
    types.u32();
    if (!types.ok()) return Error::at("BTF", types.failure_offset(), "type cut short");
    const uint32_t kind = (info >> 24) & 0x1f, vlen = info & 0xffff;
    const std::optional<uint64_t> extra = extra_bytes(kind, vlen);
    if (!extra)
      return Error::at("BTF", types.offset() - kTypeHeader,
                       fmt::format("a type of unknown kind {}", kind));
    types.skip(*extra);
    if (!types.ok()) return Error::at("BTF", types.failure_offset(), "type cut short");
    if (name_offset >= btf.strings_.size())
      return Error::at("BTF", types.offset() - kTypeHeader - *extra, "name outside the strings");
    btf.offsets_.push_back(uint32_t(at));
    if ((kind == kStruct || kind == kUnion) && vlen > 0 && name_offset != 0)
      btf.composites_.push_back(uint32_t(btf.offsets_.size()));
  }
  return btf;
}

std::string_view KernelBtf::string_at(uint32_t offset) const {
  if (offset >= strings_.size()) return {};
  const char* start = reinterpret_cast<const char*>(strings_.data()) + offset;
  return std::string_view(start, ::strnlen(start, strings_.size() - offset));
}

uint32_t KernelBtf::word(uint32_t id, size_t index) const {
  if (id == 0 || id > offsets_.size()) return 0;
  const size_t at = size_t(offsets_[id - 1]) + index * 4;
  if (at + 4 > types_.size()) return 0;
  uint32_t value;
  std::memcpy(&value, types_.data() + at, 4);
  return value;
}

uint32_t KernelBtf::find_composite(std::string_view name) const {
  for (uint32_t id : composites_)
    if (string_at(word(id, 0)) == name) return id;
  return 0;
}

uint32_t KernelBtf::kind(uint32_t id) const {
  return id == 0 || id > offsets_.size() ? 0 : (word(id, 1) >> 24) & 0x1f;
}

uint32_t KernelBtf::size_or_type(uint32_t id) const {
  return word(id, 2);
}

uint32_t KernelBtf::member_count(uint32_t id) const {
  const uint32_t k = kind(id);
  return k == kStruct || k == kUnion ? word(id, 1) & 0xffff : 0;
}

KernelBtf::Member KernelBtf::member(uint32_t id, uint32_t index) const {
  if (index >= member_count(id)) return {};
  const bool bitfields = (word(id, 1) >> 31) != 0; // kind_flag: offsets carry bitfield sizes
  const size_t first = 3 + size_t(index) * 3;
  Member m;
  m.name = string_at(word(id, first));
  m.type = word(id, first + 1);
  const uint32_t offset = word(id, first + 2);
  m.bit_offset = bitfields ? offset & 0xffffff : offset;
  m.bitfield_bits = bitfields ? offset >> 24 : 0;
  return m;
}

KernelBtf::Array KernelBtf::array(uint32_t id) const {
  if (kind(id) != kArray) return {};
  return {word(id, 3), word(id, 5)}; // (element type, index type, count)
}

uint32_t KernelBtf::skip_modifiers(uint32_t id) const {
  for (uint32_t n = 0; n < kModifierLimit; ++n) {
    const uint32_t k = kind(id);
    if (k != kTypedef && k != kVolatile && k != kConst && k != kRestrict && k != kTypeTag)
      return id;
    id = size_or_type(id);
  }
  return 0;
}

namespace {

// A member found by name in a kernel struct, through its anonymous members: where, and its type.
struct Found {
  uint32_t type = 0;
  uint32_t bit_offset = 0;
};

// (`budget`: members a lookup may look at, for a BTF whose anonymous members nest each other
// thousands wide; the kernel's largest struct has a few hundred.)
std::optional<Found> find_member(const KernelBtf& kernel, uint32_t composite, std::string_view name,
                                 uint32_t base_bits, int depth, uint32_t& budget) {
  if (depth > kNestingLimit) return std::nullopt;
  const uint32_t count = kernel.member_count(composite);
  for (uint32_t i = 0; i < count; ++i) {
    if (budget == 0) return std::nullopt;
    --budget;
    const KernelBtf::Member m = kernel.member(composite, i);
    if (m.bitfield_bits != 0) continue;
    if (m.name == name) return Found{m.type, base_bits + m.bit_offset};
    if (m.name.empty())
      if (auto inner = find_member(kernel, kernel.skip_modifiers(m.type), name,
                                   base_bits + m.bit_offset, depth + 1, budget))
        return inner;
  }
  return std::nullopt;
}

// Writes the kernel's types for the local ones into `out`.
class CoreWriter {
public:
  CoreWriter(const struct btf* local, const KernelBtf& kernel, struct btf* out)
      : local_(local), kernel_(kernel), out_(out) {}

  // A struct named `name` (empty: anonymous) for the local struct `local_id`, with the kernel's
  // `kernel_id`'s size and the offsets of the members the local one declares: its id in `out`,
  // or a negative error.
  int composite(uint32_t local_id, uint32_t kernel_id, const std::string& name, int depth) {
    if (depth > kNestingLimit) return -E2BIG;
    struct Field {
      std::string name;
      int type;
      uint32_t bit_offset;
    };
    std::vector<Field> fields;
    std::function<int(uint32_t, int)> collect = [&](uint32_t id, int level) -> int {
      if (level > kNestingLimit) return -E2BIG;
      const btf_type* t = btf__type_by_id(local_, id);
      if (!t || !btf_is_composite(t)) return 0;
      const btf_member* members = btf_members(t);
      for (uint16_t i = 0; i < btf_vlen(t); ++i) {
        const char* member_name = btf__name_by_offset(local_, members[i].name_off);
        const uint32_t member_type = uint32_t(btf__resolve_type(local_, members[i].type));
        if (!member_name || !*member_name) { // the local struct's own anonymous members
          if (int e = collect(member_type, level + 1); e < 0) return e;
          continue;
        }
        uint32_t budget = kMemberBudget;
        const auto found = find_member(kernel_, kernel_id, member_name, 0, 0, budget);
        if (!found) continue;
        const int type = kernel_type(member_type, found->type, depth);
        if (type < 0) return type;
        if (type > 0) fields.push_back({member_name, type, found->bit_offset});
      }
      return 0;
    };
    if (int e = collect(local_id, 0); e < 0) return e;
    const int id = btf__add_struct(out_, name.c_str(), kernel_.size_or_type(kernel_id));
    if (id < 0) return id;
    for (const Field& f : fields)
      if (int e = btf__add_field(out_, f.name.c_str(), f.type, f.bit_offset, 0); e < 0) return e;
    return id;
  }

private:
  // The type written for a member the kernel has as `kernel_type` (the local one's
  // `local_type`): its id, 0 to leave the member out (a kind CO-RE would not match), or a
  // negative error.
  int kernel_type(uint32_t local_type, uint32_t kernel_type, int depth) {
    const uint32_t k = kernel_.skip_modifiers(kernel_type);
    switch (kernel_.kind(k)) {
    case KernelBtf::kPtr:
      if (pointer_ == 0) pointer_ = btf__add_ptr(out_, 0);
      return pointer_;
    case KernelBtf::kInt:
    case KernelBtf::kEnum:
    case KernelBtf::kEnum64:
      return integer(kernel_.size_or_type(k));
    case KernelBtf::kArray: {
      const btf_type* t = btf__type_by_id(local_, local_type);
      if (!t || !btf_is_array(t)) return 0;
      const KernelBtf::Array a = kernel_.array(k);
      const uint32_t element = kernel_.skip_modifiers(a.element);
      const uint32_t element_kind = kernel_.kind(element);
      if (element_kind != KernelBtf::kInt && element_kind != KernelBtf::kEnum) return 0;
      const int element_id = integer(kernel_.size_or_type(element));
      const int index_id = integer(4);
      if (element_id < 0) return element_id;
      if (index_id < 0) return index_id;
      if (element_id == 0 || index_id == 0) return 0;
      return btf__add_array(out_, index_id, element_id, a.count);
    }
    case KernelBtf::kStruct:
    case KernelBtf::kUnion: {
      const btf_type* t = btf__type_by_id(local_, local_type);
      if (!t || !btf_is_composite(t)) return 0;
      return composite(local_type, k, "", depth + 1);
    }
    default:
      return 0;
    }
  }

  // An integer type of `size` bytes: its id, 0 for a size no integer has, or a negative error.
  int integer(uint32_t size) {
    if (size == 0 || size > 16 || (size & (size - 1)) != 0) return 0;
    int& id = integers_[size];
    if (id == 0) id = btf__add_int(out_, fmt::format("u{}", size * 8).c_str(), size, 0);
    return id;
  }

  const struct btf* local_;
  const KernelBtf& kernel_;
  struct btf* out_;
  int pointer_ = 0;
  std::map<uint32_t, int> integers_; // by size
};

} // namespace

Result<std::vector<uint8_t>> core_btf(const struct btf* local, const KernelBtf& kernel) {
  std::unique_ptr<struct btf, void (*)(struct btf*)> out(btf__new_empty(), btf__free);
  if (!out) return Error::plain("cannot make a BTF");
  CoreWriter writer(local, kernel, out.get());
  const uint32_t count = btf__type_cnt(local);
  for (uint32_t id = 1; id < count; ++id) {
    const btf_type* t = btf__type_by_id(local, id);
    if (!t || !btf_is_struct(t)) continue;
    const char* full = btf__name_by_offset(local, t->name_off);
    const std::string_view name = full ? full : "";
    const size_t flavor = name.find("___");
    if (flavor == std::string_view::npos || flavor == 0) continue;
    const std::string essential(name.substr(0, flavor));
    const uint32_t kernel_id = kernel.find_composite(essential);
    if (kernel_id == 0) return Error::plain("the kernel's BTF has no struct " + essential);
    if (int e = writer.composite(id, kernel_id, essential, 0); e < 0)
      return Error::plain(fmt::format("cannot write struct {}: {}", essential, std::strerror(-e)));
  }
  uint32_t size = 0;
  const auto* raw = static_cast<const uint8_t*>(btf__raw_data(out.get(), &size));
  if (!raw) return Error::plain("cannot write the BTF");
  return std::vector<uint8_t>(raw, raw + size);
}

Result<KernelBtfFile> KernelBtfFile::open() {
  constexpr const char* kPath = "/sys/kernel/btf/vmlinux";
  const int fd = ::open(kPath, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::plain(fmt::format("{}: {}", kPath, std::strerror(errno)));
  KernelBtfFile file;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (1 << 30)) {
    ::close(fd);
    return Error::plain(fmt::format("{}: no size", kPath));
  }
  const size_t size = size_t(st.st_size);
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped != MAP_FAILED) {
    file.mapped_ = mapped;
    file.mapped_size_ = size;
    file.bytes_ = {static_cast<const uint8_t*>(mapped), size};
  } else {
    file.read_.resize(size);
    if (Status read = read_fully(fd, file.read_); !read) {
      ::close(fd);
      return Error::plain(fmt::format("{}: {}", kPath, read.error().message));
    }
    file.bytes_ = file.read_;
  }
  ::close(fd);
  return file;
}

KernelBtfFile::KernelBtfFile(KernelBtfFile&& other) noexcept
    : mapped_(other.mapped_), mapped_size_(other.mapped_size_), read_(std::move(other.read_)),
      bytes_(other.mapped_ ? other.bytes_ : std::span<const uint8_t>(read_)) {
  other.mapped_ = nullptr;
  other.mapped_size_ = 0;
  other.bytes_ = {};
}

KernelBtfFile::~KernelBtfFile() {
  if (mapped_) ::munmap(mapped_, mapped_size_);
}

} // namespace ehelf::bpf
