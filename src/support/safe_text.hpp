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

// `text` made safe for a one-line message on a terminal: control bytes (below 0x20, and 0x7f:
// newlines, escape sequences) become \xNN, everything else is kept (names in UTF-8 stay
// readable). For names read from files (archive members) that error lines quote.
std::string message_safe(std::string_view text);

} // namespace ehelf
