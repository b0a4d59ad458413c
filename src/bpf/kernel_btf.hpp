// The running kernel's BTF, read for the struct members the in-kernel walk's CO-RE relocations
// name, and a BTF of those members alone that libbpf takes as its btf_custom_path.
//
// Why: libbpf 1.1 reads all of /sys/kernel/btf/vmlinux (5.5 MB here, a page per read(2)) into a
// new buffer, indexes it, and scans every one of its ~130k types once for each struct the program
// reads (six: ~2 ms each); together 25-35 ms of a ~70 ms load, every `ehelf record`. Here the
// file is mapped (Linux 6.16+ maps it; before, it is read) and walked once; libbpf then resolves
// the same relocations against a BTF of a few hundred bytes. The offsets are the kernel's own:
// only where they come from changes (tests/unit/test_kernel_btf.cpp holds them to libbpf's).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "support/result.hpp"

struct btf;

namespace ehelf::bpf {

// A BTF blob (header, types, strings), indexed: each type by id, and its named structs and
// unions. Nothing here reads outside the bytes given; a malformed blob is an error naming the
// offset.
class KernelBtf {
public:
  // BTF_KIND_* (linux/btf.h), those read here.
  enum Kind : uint32_t {
    kInt = 1,
    kPtr = 2,
    kArray = 3,
    kStruct = 4,
    kUnion = 5,
    kEnum = 6,
    kTypedef = 8,
    kVolatile = 9,
    kConst = 10,
    kRestrict = 11,
    kTypeTag = 18,
    kEnum64 = 19,
  };
  struct Member {
    std::string_view name; // empty: an anonymous struct or union, its members the parent's
    uint32_t type = 0;
    uint32_t bit_offset = 0;
    uint32_t bitfield_bits = 0; // 0: not a bitfield
  };

  // `bytes` must outlive the result.
  static Result<KernelBtf> parse(std::span<const uint8_t> bytes);

  // The first struct or union named `name` that has members (not a declaration), or 0.
  uint32_t find_composite(std::string_view name) const;
  uint32_t kind(uint32_t id) const;
  // A struct's, union's, integer's or enum's size in bytes; a modifier's or pointer's type.
  uint32_t size_or_type(uint32_t id) const;
  uint32_t member_count(uint32_t id) const; // of a struct or union, else 0
  Member member(uint32_t id, uint32_t index) const;
  struct Array {
    uint32_t element = 0;
    uint32_t count = 0;
  };
  Array array(uint32_t id) const; // of an array, else {}
  // The type under typedefs and qualifiers (at most 32 of them: a cycle ends there).
  uint32_t skip_modifiers(uint32_t id) const;

private:
  std::span<const uint8_t> types_, strings_;
  std::vector<uint32_t> offsets_; // type id i at types_[offsets_[i - 1]]
  // The named structs and unions with members, in id order: a few of them are looked up, once
  // each (a scan of their names costs less than hashing all of them).
  std::vector<uint32_t> composites_;

  uint32_t word(uint32_t id, size_t index) const; // the type's index-th 32-bit word
  std::string_view string_at(uint32_t offset) const;
};

// For each struct of `local` (the BPF object's BTF) whose name has a flavor ("task_struct___x"),
// a struct of the name without it in a new BTF, holding those of its members `local` declares
// at the kernel's offsets, found by name through the kernel struct's anonymous members:
// pointers as pointers, integers and enums as integers of their size, arrays of integers as
// arrays of as many, nested structs alike. A
// member the kernel lacks is left out (libbpf's bpf_core_field_exists is then 0, as against the
// whole BTF). An error when the kernel has no struct of that name. The BTF's raw bytes.
Result<std::vector<uint8_t>> core_btf(const struct btf* local, const KernelBtf& kernel);

// /sys/kernel/btf/vmlinux: mapped where the kernel maps it (6.16+), else read.
class KernelBtfFile {
public:
  static Result<KernelBtfFile> open();
  KernelBtfFile(KernelBtfFile&& other) noexcept;
  KernelBtfFile& operator=(KernelBtfFile&&) = delete;
  ~KernelBtfFile();
  std::span<const uint8_t> bytes() const { return bytes_; }

private:
  KernelBtfFile() = default;
  void* mapped_ = nullptr;
  size_t mapped_size_ = 0;
  std::vector<uint8_t> read_;
  std::span<const uint8_t> bytes_;
};

} // namespace ehelf::bpf
