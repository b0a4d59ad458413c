// libFuzzer target: arbitrary bytes as a cached eh_elf, checked before any of its code could run
// (check_eh_elf_image). Every read must stay inside the input and every check must end; the
// seeds are real objects made by `ehelf compile` (scripts/fuzz.sh), so mutations explore the
// structure the check accepts.
#include <cstddef>
#include <cstdint>
#include <span>

#include "eh_elf/eh_elf_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)ehelf::check_eh_elf_image(std::span<const uint8_t>(data, size));
  return 0;
}
