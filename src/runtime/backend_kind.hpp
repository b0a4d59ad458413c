// BackendKind: which form of the unwind tables a step runs (unwinder.hpp describes each).
#pragma once

namespace ehelf {

enum class BackendKind { Auto, Compiled, Table, Interpreter };

} // namespace ehelf
