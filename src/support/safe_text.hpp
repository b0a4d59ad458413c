// Text from outside (file names, section and symbol names) made safe to embed in generated code
// and in one-line messages.
#pragma once

#include <string>
#include <string_view>

namespace ehelf {

// `text` made safe for a C comment: only [A-Za-z0-9._/-] are kept, every other byte becomes the
// four characters \xNN, and more than 256 bytes are cut to "...". The result cannot close the
// comment, splice a line (backslash-newline, or the trigraph ??/) or start one: no string from
// outside changes the structure of generated code.
std::string comment_safe(std::string_view text);

} // namespace ehelf
