// Fuzzes KernelBtf::parse and core_btf (bpf/kernel_btf.hpp) with arbitrary bytes as the kernel's
// BTF: an error or a BTF of the program's structs, never a read outside the bytes, a crash or a
// hang (anonymous members nested thousands wide are bounded).
#include <bpf/btf.h>

#include <cstddef>
#include <cstdint>

#include "bpf/kernel_btf.hpp"

namespace {

// The program's flavoured structs, as clang writes them in its BTF (unwind.bpf.c's, in part).
struct btf* local_types() {
  struct btf* local = btf__new_empty();
  const int u64 = btf__add_int(local, "unsigned long", 8, 0);
  const int ptr = btf__add_ptr(local, 0);
  const int u32 = btf__add_int(local, "unsigned int", 4, 0);
  const int auxv = btf__add_array(local, u32, u64, 2);
  const int context = btf__add_struct(local, "", 8);
  btf__add_field(local, "vdso", ptr, 0, 0);
  btf__add_struct(local, "mm_struct___f", 40);
  btf__add_field(local, "start_code", u64, 0, 0);
  btf__add_field(local, "exe_file", ptr, 64, 0);
  btf__add_field(local, "context", context, 128, 0);
  btf__add_field(local, "saved_auxv", auxv, 192, 0);
  btf__add_struct(local, "task_struct___f", 8);
  btf__add_field(local, "mm", ptr, 0, 0);
  return local;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static struct btf* const local = local_types();
  auto btf = ehelf::bpf::KernelBtf::parse({data, size});
  if (!btf) return 0;
  for (uint32_t id = 0; id < 64; ++id) {
    (void)btf->kind(id);
    (void)btf->size_or_type(id);
    (void)btf->skip_modifiers(id);
    for (uint32_t i = 0; i < btf->member_count(id) && i < 16; ++i)
      (void)btf->member(id, i);
  }
  (void)ehelf::bpf::core_btf(local, *btf);
  return 0;
}
