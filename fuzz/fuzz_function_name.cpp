// libFuzzer target for function_name_only: arbitrary text as a demangled name (the demangler
// prints whatever a hostile symbol table spells). The name found must be a part of the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/function_name.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string_view name = ehelf::function_name_only(text);
  if (!name.empty() &&
      (name.data() < text.data() || name.data() + name.size() > text.data() + size))
    std::abort();
  return 0;
}
