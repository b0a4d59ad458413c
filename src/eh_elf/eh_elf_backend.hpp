// A compiled eh_elf as a backend under test (model/backend_oracle.hpp): its remote variant reads
// memory through the oracle's reader, its local variant reads the oracle's real stack buffer.
#pragma once

#include "eh_elf/eh_elf_object.hpp"
#include "model/backend_oracle.hpp"

namespace ehelf {

// `object` must outlive the result.
BackendUnderTest eh_elf_backend(const EhElfObject& object, bool local);

} // namespace ehelf
