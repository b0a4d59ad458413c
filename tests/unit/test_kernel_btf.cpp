// KernelBtf and core_btf (bpf/kernel_btf.hpp): the BTF the in-kernel walk's CO-RE relocations are
// resolved against holds the members the program's own structs declare at the offsets the
// kernel's BTF gives them, as libbpf finds them in the whole of it (the oracle: libbpf's parse
// of /sys/kernel/btf/vmlinux); a malformed BTF is an error naming the offset, never a read
// outside it.
#include <gtest/gtest.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/kernel_btf.hpp"

namespace ehelf::bpf {
namespace {

using BtfPtr = std::unique_ptr<struct btf, void (*)(struct btf*)>;

// A member's bit offset in struct `name` of `btf`, looked up by name through its anonymous
// members with libbpf's own reader; nullopt when it has none.
std::optional<uint32_t> libbpf_offset(const struct btf* btf, uint32_t id, const std::string& member,
                                      uint32_t base = 0) {
  const btf_type* t = btf__type_by_id(btf, id);
  if (!t || !btf_is_composite(t)) return std::nullopt;
  const btf_member* members = btf_members(t);
  for (uint16_t i = 0; i < btf_vlen(t); ++i) {
    const char* name = btf__name_by_offset(btf, members[i].name_off);
    const uint32_t offset = base + btf_member_bit_offset(t, i);
    if (name && member == name) return offset;
    if (!name || !*name)
      if (auto inner =
              libbpf_offset(btf, uint32_t(btf__resolve_type(btf, members[i].type)), member, offset))
        return inner;
  }
  return std::nullopt;
}

// A member's type (under typedefs), found as libbpf_offset finds it; 0 when it has none.
uint32_t member_type(const struct btf* btf, uint32_t id, const std::string& member) {
  const btf_type* t = btf__type_by_id(btf, id);
  if (!t || !btf_is_composite(t)) return 0;
  const btf_member* members = btf_members(t);
  for (uint16_t i = 0; i < btf_vlen(t); ++i) {
    const char* name = btf__name_by_offset(btf, members[i].name_off);
    const uint32_t type = uint32_t(btf__resolve_type(btf, members[i].type));
    if (name && member == name) return type;
    if (!name || !*name)
      if (const uint32_t inner = member_type(btf, type, member)) return inner;
  }
  return 0;
}

uint32_t struct_id(const struct btf* btf, const char* name) {
  const int id = btf__find_by_name_kind(btf, name, BTF_KIND_STRUCT);
  return id > 0 ? uint32_t(id) : 0;
}

// A local BTF as clang writes one for the program's flavoured structs (unwind.bpf.c's).
BtfPtr local_types() {
  BtfPtr local(btf__new_empty(), btf__free);
  const int u64 = btf__add_int(local.get(), "unsigned long", 8, 0);
  const int s32 = btf__add_int(local.get(), "int", 4, BTF_INT_SIGNED);
  const int ptr = btf__add_ptr(local.get(), 0);
  const int u32 = btf__add_int(local.get(), "unsigned int", 4, 0);
  const int auxv = btf__add_array(local.get(), u32, u64, 2);
  const int context = btf__add_struct(local.get(), "", 8);
  btf__add_field(local.get(), "vdso", ptr, 0, 0);
  btf__add_struct(local.get(), "mm_struct___t", 64);
  btf__add_field(local.get(), "exe_file", ptr, 0, 0);
  btf__add_field(local.get(), "start_code", u64, 64, 0);
  btf__add_field(local.get(), "start_stack", u64, 128, 0);
  btf__add_field(local.get(), "context", context, 192, 0);
  btf__add_field(local.get(), "no_such_member___", u64, 256, 0);
  btf__add_field(local.get(), "saved_auxv", auxv, 320, 0);
  btf__add_struct(local.get(), "task_struct___t", 24);
  btf__add_field(local.get(), "mm", ptr, 0, 0);
  btf__add_field(local.get(), "real_parent", ptr, 64, 0);
  btf__add_field(local.get(), "tgid", s32, 128, 0);
  btf__add_struct(local.get(), "vm_area_struct___t", 16);
  btf__add_field(local.get(), "vm_flags", u64, 0, 0);
  btf__add_field(local.get(), "vm_pgoff", u64, 64, 0);
  btf__add_struct(local.get(), "not_flavoured", 8); // not the program's: left out
  btf__add_field(local.get(), "x", u64, 0, 0);
  return local;
}

TEST(KernelBtf, TheMembersTheProgramReadsAreWhereLibbpfFindsThemInTheKernelsBtf) {
  auto file = KernelBtfFile::open();
  if (!file) GTEST_SKIP() << "no kernel BTF here: " << file.error().message;
  auto kernel = KernelBtf::parse(file->bytes());
  ASSERT_TRUE(kernel) << kernel.error().to_string();
  BtfPtr whole(btf__load_vmlinux_btf(), btf__free);
  ASSERT_TRUE(whole) << "libbpf cannot read the kernel's BTF";
  BtfPtr local = local_types();
  auto bytes = core_btf(local.get(), *kernel);
  ASSERT_TRUE(bytes) << bytes.error().to_string();
  BtfPtr core(btf__new(bytes->data(), uint32_t(bytes->size())), btf__free);
  ASSERT_TRUE(core) << "libbpf does not take the BTF written";
  EXPECT_LT(bytes->size(), 2048u); // (the kernel's: megabytes)

  struct Case {
    const char* type;
    const char* member;
  };
  const Case cases[] = {{"mm_struct", "exe_file"},      {"mm_struct", "start_code"},
                        {"mm_struct", "start_stack"},   {"mm_struct", "context"},
                        {"task_struct", "mm"},          {"task_struct", "real_parent"},
                        {"task_struct", "tgid"},        {"vm_area_struct", "vm_flags"},
                        {"vm_area_struct", "vm_pgoff"}, {"mm_struct", "saved_auxv"}};
  for (const Case& c : cases) {
    const auto expected = libbpf_offset(whole.get(), struct_id(whole.get(), c.type), c.member);
    ASSERT_TRUE(expected) << c.type << "." << c.member << " not in the kernel's BTF";
    const uint32_t id = struct_id(core.get(), c.type);
    ASSERT_NE(id, 0u) << c.type;
    EXPECT_EQ(libbpf_offset(core.get(), id, c.member), expected) << c.type << "." << c.member;
    // The struct's size is the kernel's.
    EXPECT_EQ(btf__type_by_id(core.get(), id)->size,
              btf__type_by_id(whole.get(), struct_id(whole.get(), c.type))->size);
  }
  // A nested struct's member, at its offset within the nested struct (context.vdso).
  const auto vdso = [](const struct btf* btf) {
    const uint32_t context = member_type(btf, struct_id(btf, "mm_struct"), "context");
    return context ? libbpf_offset(btf, context, "vdso") : std::nullopt;
  };
  ASSERT_TRUE(vdso(whole.get()));
  EXPECT_EQ(vdso(core.get()), vdso(whole.get()));
  // An array of integers keeps the kernel's length (the aux vector: bpf_core_field_size).
  const auto auxv_length = [](const struct btf* btf) -> int64_t {
    const uint32_t type = member_type(btf, struct_id(btf, "mm_struct"), "saved_auxv");
    const btf_type* t = type ? btf__type_by_id(btf, type) : nullptr;
    return t && btf_is_array(t) ? int64_t(btf_array(t)->nelems) : -1;
  };
  EXPECT_GT(auxv_length(whole.get()), 2);
  EXPECT_EQ(auxv_length(core.get()), auxv_length(whole.get()));
  // Pointers stay pointers and integers integers (what CO-RE's compatibility check looks at).
  const btf_type* task = btf__type_by_id(core.get(), struct_id(core.get(), "task_struct"));
  for (uint16_t i = 0; i < btf_vlen(task); ++i) {
    const std::string name = btf__name_by_offset(core.get(), btf_members(task)[i].name_off);
    const btf_type* type = btf__type_by_id(core.get(), btf_members(task)[i].type);
    if (name == "tgid") {
      EXPECT_TRUE(btf_is_int(type) && type->size == 4);
    } else if (name == "mm") {
      EXPECT_TRUE(btf_is_ptr(type));
    }
  }
  // A member the kernel lacks is left out; a struct without a flavour is not written.
  EXPECT_FALSE(libbpf_offset(core.get(), struct_id(core.get(), "mm_struct"), "no_such_member___"));
  EXPECT_EQ(struct_id(core.get(), "not_flavoured"), 0u);
}

TEST(KernelBtf, AStructTheKernelLacksIsAnError) {
  auto file = KernelBtfFile::open();
  if (!file) GTEST_SKIP() << "no kernel BTF here";
  auto kernel = KernelBtf::parse(file->bytes());
  ASSERT_TRUE(kernel);
  BtfPtr local(btf__new_empty(), btf__free);
  const int u64 = btf__add_int(local.get(), "unsigned long", 8, 0);
  btf__add_struct(local.get(), "no_such_struct_anywhere___t", 8);
  btf__add_field(local.get(), "x", u64, 0, 0);
  auto bytes = core_btf(local.get(), *kernel);
  ASSERT_FALSE(bytes);
  EXPECT_NE(bytes.error().to_string().find("no_such_struct_anywhere"), std::string::npos);
}

// A small BTF written by libbpf, to break.
std::vector<uint8_t> small_btf() {
  BtfPtr b(btf__new_empty(), btf__free);
  const int u32 = btf__add_int(b.get(), "u32", 4, 0);
  btf__add_struct(b.get(), "thing", 8);
  btf__add_field(b.get(), "a", u32, 0, 0);
  btf__add_field(b.get(), "b", u32, 32, 0);
  uint32_t size = 0;
  const auto* raw = static_cast<const uint8_t*>(btf__raw_data(b.get(), &size));
  return std::vector<uint8_t>(raw, raw + size);
}

TEST(KernelBtf, ReadsASmallBtf) {
  const std::vector<uint8_t> bytes = small_btf();
  auto btf = KernelBtf::parse(bytes);
  ASSERT_TRUE(btf) << btf.error().to_string();
  const uint32_t thing = btf->find_composite("thing");
  ASSERT_NE(thing, 0u);
  EXPECT_EQ(btf->kind(thing), KernelBtf::kStruct);
  EXPECT_EQ(btf->size_or_type(thing), 8u);
  ASSERT_EQ(btf->member_count(thing), 2u);
  EXPECT_EQ(btf->member(thing, 1).name, "b");
  EXPECT_EQ(btf->member(thing, 1).bit_offset, 32u);
  EXPECT_EQ(btf->kind(btf->member(thing, 1).type), KernelBtf::kInt);
  EXPECT_EQ(btf->find_composite("other"), 0u);
  EXPECT_EQ(btf->kind(9999), 0u); // an id past the types: nothing
}

TEST(KernelBtf, AMalformedBtfIsAnErrorNamingTheOffset) {
  const std::vector<uint8_t> good = small_btf();
  // Every prefix: an error, no read past it (ASan watches).
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    EXPECT_FALSE(KernelBtf::parse(cut)) << n << " bytes";
  }
  std::vector<uint8_t> bad = good;
  bad[0] ^= 0xff;
  auto magic = KernelBtf::parse(bad);
  ASSERT_FALSE(magic);
  EXPECT_NE(magic.error().to_string().find("magic"), std::string::npos);
  // A type of a kind no BTF has (31), at the first type (header 24 bytes).
  bad = good;
  bad[24 + 7] = 31;
  auto kind = KernelBtf::parse(bad);
  ASSERT_FALSE(kind);
  EXPECT_NE(kind.error().to_string().find("BTF+0x18: a type of unknown kind 31"), std::string::npos)
      << kind.error().to_string();
  // A struct claiming more members than the types hold.
  bad = good;
  bad[24 + 16 + 4] = 0xff; // the struct's vlen (second type: after the int's 16 bytes)
  EXPECT_FALSE(KernelBtf::parse(bad));
}

} // namespace
} // namespace ehelf::bpf
