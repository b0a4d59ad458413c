#include "runtime/function_name.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace ehelf {
namespace {

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}

bool starts_with_word(std::string_view s, size_t at, std::string_view word) {
  if (s.compare(at, word.size(), word) != 0) return false;
  const size_t end = at + word.size();
  return end == s.size() || !is_identifier_char(s[end]) || !is_identifier_char(word.back());
}

// How the demangler prints operator names after "operator", longest first where one is the
// start of another ("<<=" before "<<" before "<").
constexpr std::array<std::string_view, 40> kSymbolOperators = {
    "->*", "<<=", ">>=", "<=>", "()", "[]", "->", "<<", ">>", "<=", "<",  ">=",  "==", "!=",
    "&&",  "||",  "++",  "--",  "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",  ">",  "+",
    "-",   "*",   "/",   "%",   "&",  "|",  "^",  "~",  "!",  "=",  ",",  "\"\""};
constexpr std::array<std::string_view, 5> kWordOperators = {"new[]", "delete[]", "new", "delete",
                                                            "co_await"};

// The special names of the Itanium ABI as the demangler prints them: thunks, clones and data
// about a type or an object. Without DMGL_PARAMS their inner names are printed whole.
constexpr std::array<std::string_view, 20> kSpecialPrefixes = {"vtable for ",
                                                               "VTT for ",
                                                               "construction vtable for ",
                                                               "typeinfo for ",
                                                               "typeinfo name for ",
                                                               "typeinfo fn for ",
                                                               "non-virtual thunk to ",
                                                               "virtual thunk to ",
                                                               "covariant return thunk to ",
                                                               "java Class for ",
                                                               "guard variable for ",
                                                               "TLS init function for ",
                                                               "TLS wrapper function for ",
                                                               "reference temporary #",
                                                               "hidden alias for ",
                                                               "transaction clone for ",
                                                               "non-transaction clone for ",
                                                               "java resource ",
                                                               "template parameter object for ",
                                                               "initializer for module "};

// The qualifiers printed after a member function's parameters (and before "::" in a local name).
constexpr std::array<std::string_view, 8> kFunctionQualifiers = {
    "const", "volatile", "restrict", "&&", "&", "transaction_safe", "noexcept", "throw"};

// The brackets of a demangled name paired: partner[i] is the other end of the group whose end
// is at i (-1: no group ends there), top_level[i] that i is outside every group (a group's own
// ends count as outside), in_token[i] that i is inside an operator's name or
// "(anonymous namespace)", whose brackets and spaces are no syntax.
struct Brackets {
  std::vector<int32_t> partner;
  std::vector<uint8_t> top_level, in_token;
  std::vector<uint8_t> conversion; // i starts the type of a conversion operator ("operator int")
};

Brackets pair_brackets(std::string_view s) {
  Brackets b;
  b.partner.assign(s.size(), -1);
  b.top_level.assign(s.size(), 0);
  b.in_token.assign(s.size(), 0);
  b.conversion.assign(s.size(), 0);
  std::vector<size_t> open; // positions of the open brackets
  // How many of `open` are '(', '[' and '{': a closing bracket with none open is plain text,
  // found so without a search (linear time on any input).
  size_t open_count[3] = {0, 0, 0};
  auto kind = [](char c) { return c == '(' || c == ')' ? 0 : c == '[' || c == ']' ? 1 : 2; };
  auto mark_token = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) {
      b.in_token[k] = 1;
      b.top_level[k] = open.empty();
    }
  };
  // Where template arguments may start: right after a name or an operator's name.
  size_t after_operator = std::string_view::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' && s.compare(i, 21, "(anonymous namespace)") == 0) {
      mark_token(i, i + 21);
      i += 20;
      continue;
    }
    if (c == 'o' && (i == 0 || !is_identifier_char(s[i - 1])) &&
        starts_with_word(s, i, "operator")) {
      size_t j = i + 8;
      bool matched = false;
      if (j < s.size() && s[j] == ' ') {
        for (std::string_view w : kWordOperators)
          if (starts_with_word(s, j + 1, w)) {
            j += 1 + w.size();
            matched = true;
            break;
          }
        if (!matched) { // a conversion: its type follows, brackets and all
          mark_token(i, j + 1);
          if (j + 1 < s.size()) b.conversion[j + 1] = 1;
          i = j;
          continue;
        }
      } else {
        for (std::string_view op : kSymbolOperators)
          if (s.compare(j, op.size(), op) == 0) {
            j += op.size();
            matched = true;
            break;
          }
        if (matched && s.compare(j - 2, 2, "\"\"") == 0 && j < s.size() && s[j] == ' ') ++j;
      }
      if (matched) {
        // "operator<< <char>": the demangler's space between two '<'.
        if (j + 1 < s.size() && s[j] == ' ' && s[j + 1] == '<') ++j;
        mark_token(i, j);
        after_operator = j;
        i = j - 1;
        continue;
      }
    }
    switch (c) {
    case '<':
      // Template arguments follow a name; a '<' elsewhere compares in an expression.
      if (i == after_operator || (i > 0 && (is_identifier_char(s[i - 1]) || s[i - 1] == ']'))) {
        b.top_level[i] = open.empty();
        open.push_back(i);
        continue;
      }
      break;
    case '(':
    case '[':
    case '{':
      b.top_level[i] = open.empty();
      open.push_back(i);
      ++open_count[kind(c)];
      continue;
    case '>':
      if (!open.empty() && s[open.back()] == '<') {
        b.partner[i] = static_cast<int32_t>(open.back());
        b.partner[open.back()] = static_cast<int32_t>(i);
        open.pop_back();
        b.top_level[i] = open.empty();
        continue;
      }
      break;
    case ')':
    case ']':
    case '}': {
      const char opener = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (open_count[kind(c)] == 0) break; // unpaired: plain text
      size_t k = open.size();
      while (s[open[k - 1]] != opener) // what is left open inside goes with it
        if (s[open[--k]] != '<') --open_count[kind(s[open[k]])];
      open.resize(k);
      --open_count[kind(c)];
      b.partner[i] = static_cast<int32_t>(open.back());
      b.partner[open.back()] = static_cast<int32_t>(i);
      open.pop_back();
      b.top_level[i] = open.empty();
      continue;
    }
    default:
      break;
    }
    b.top_level[i] = open.empty();
  }
  return b;
}

// A group that ends at `close` (its opening bracket's position), or npos.
size_t group_start(const Brackets& b, size_t close) {
  if (close >= b.partner.size() || !b.top_level[close] || b.in_token[close] ||
      b.partner[close] < 0 || static_cast<size_t>(b.partner[close]) > close)
    return std::string_view::npos;
  return static_cast<size_t>(b.partner[close]);
}

// The end of `s[0, end)` without the function qualifiers at its end (" const &", " noexcept").
size_t without_qualifiers(std::string_view s, const Brackets& b, size_t end) {
  for (bool more = true; more;) {
    more = false;
    if (end > 0 && s[end - 1] == ')')
      if (size_t open = group_start(b, end - 1); open != std::string_view::npos)
        for (std::string_view q : {std::string_view(" throw"), std::string_view(" noexcept")})
          if (open >= q.size() && s.substr(open - q.size(), q.size()) == q) {
            end = open - q.size();
            more = true;
          }
    for (std::string_view q : kFunctionQualifiers)
      if (end > q.size() && s.substr(end - q.size(), q.size()) == q &&
          s[end - q.size() - 1] == ' ' && b.top_level[end - 1] && !b.in_token[end - 1]) {
        end -= q.size() + 1;
        more = true;
        break;
      }
  }
  return end;
}

// The pointer declarator a wrapped return type puts before the function's name ("*", "&",
// "A::*"): its length, 0 if `inner` starts with none.
size_t pointer_declarator(std::string_view inner) {
  size_t k = 0;
  if (!inner.empty() && (inner[0] == '*' || inner[0] == '&')) {
    while (k < inner.size() && (inner[k] == '*' || inner[k] == '&' || inner[k] == ' '))
      ++k;
    return k;
  }
  const size_t member = inner.find("::*");
  if (member == std::string_view::npos ||
      inner.substr(0, member).find_first_of("( ") != std::string_view::npos)
    return 0;
  k = member + 3;
  while (k < inner.size() && inner[k] == ' ')
    ++k;
  return k;
}

// The identifier of the name component that ends at `end` in s (template arguments and ABI
// tags dropped), and where that component starts.
std::string_view component_identifier(std::string_view s, const Brackets& b, size_t end,
                                      size_t& start) {
  while (end > 0 && (s[end - 1] == '>' || s[end - 1] == ']'))
    if (size_t open = group_start(b, end - 1); open != std::string_view::npos)
      end = open;
    else
      break;
  start = end;
  while (start > 0 && is_identifier_char(s[start - 1]))
    --start;
  if (start > 0 && s[start - 1] == '~') --start;
  return s.substr(start, end - start);
}

// Whether the demangler printed a return type before the name s[0, end): for a template that
// is no constructor, destructor or conversion operator.
bool has_return_type(std::string_view s, const Brackets& b, size_t end) {
  if (end == 0 || s[end - 1] != '>' || group_start(b, end - 1) == std::string_view::npos)
    return false;
  const size_t args = group_start(b, end - 1);
  if (args > 0 && b.in_token[args - 1]) { // an operator's template
    size_t k = args;
    while (k > 0 && b.in_token[k - 1])
      --k;
    for (size_t j = k; j < args; ++j)
      if (b.conversion[j]) return false;
    return true;
  }
  for (size_t j = 0; j < args; ++j) // a conversion operator to a template type
    if (b.conversion[j] && b.top_level[j]) return false;
  size_t start = 0;
  const std::string_view last = component_identifier(s, b, end, start);
  if (last.empty() || last[0] == '~') return false;
  if (start < 2 || s.substr(start - 2, 2) != "::") return true;
  size_t previous_start = 0;
  const std::string_view previous = component_identifier(s, b, start - 2, previous_start);
  return previous != last;
}

// Where the name starts after the return type in s[0, end): after the first space outside
// brackets that ends the type ("unsigned long", "char const*", "decltype (x)" go on).
size_t after_return_type(std::string_view s, const Brackets& b, size_t end) {
  for (size_t i = 0; i + 1 < end; ++i) {
    if (s[i] != ' ' || !b.top_level[i] || b.in_token[i]) continue;
    const std::string_view next = s.substr(i + 1, end - i - 1);
    size_t word_start = i;
    while (word_start > 0 && is_identifier_char(s[word_start - 1]))
      --word_start;
    const std::string_view previous = s.substr(word_start, i - word_start);
    bool goes_on = next[0] == '*' || next[0] == '&' || next[0] == '[' ||
                   (next[0] == '(' && !b.in_token[i + 1]) || previous == "unsigned" ||
                   previous == "signed" || previous == "decltype" ||
                   (previous == "long" &&
                    (starts_with_word(next, 0, "long") || starts_with_word(next, 0, "double")));
    for (std::string_view q : kFunctionQualifiers)
      goes_on = goes_on || starts_with_word(next, 0, q);
    // A pointer to a data member: "int A::* f<int>()".
    size_t word_end = i + 1;
    while (word_end < end && !(s[word_end] == ' ' && b.top_level[word_end]))
      ++word_end;
    goes_on = goes_on || s.substr(i + 1, word_end - i - 1).ends_with("::*");
    if (!goes_on) return i + 1;
  }
  return 0;
}

std::string_view name_only(std::string_view s, bool may_have_return_type, int nesting) {
  const Brackets b = pair_brackets(s);
  size_t end = without_qualifiers(s, b, s.size());
  // A template returning a reference to an array: "int (&f<int>()) [3]".
  bool array_returned = false;
  while (end > 0 && s[end - 1] == ']') {
    const size_t open = group_start(b, end - 1);
    if (open == std::string_view::npos || s.compare(open, 5, "[abi:") == 0) break;
    end = open;
    if (end > 0 && s[end - 1] == ' ') --end;
    array_returned = true;
  }
  if (end == 0 || s[end - 1] != ')') return s; // no parameters: a data symbol's name
  const size_t params = group_start(b, end - 1);
  if (params == std::string_view::npos) return s;
  // A template returning a pointer to a function or array: the name is inside the declarator,
  // "void (*f<int>(int))(char)".
  const size_t wrap_close = array_returned ? end - 1 : params - 1;
  if ((array_returned || (params > 0 && s[params - 1] == ')')) && nesting < 64)
    if (size_t wrap_open = group_start(b, wrap_close); wrap_open != std::string_view::npos) {
      const std::string_view inner = s.substr(wrap_open + 1, wrap_close - wrap_open - 1);
      const size_t declarator = pointer_declarator(inner);
      if (declarator > 0 && declarator < inner.size())
        return name_only(inner.substr(declarator), false, nesting + 1);
    }
  if (array_returned) return s;
  size_t start = 0;
  if (may_have_return_type && has_return_type(s, b, params))
    start = after_return_type(s, b, params);
  return s.substr(start, params - start);
}

} // namespace

std::string_view function_name_only(std::string_view demangled) {
  std::string_view s = demangled;
  // The clone suffixes GCC's symbol names end with (".cold", ".part.0"), last first.
  while (s.size() > 9 && s.back() == ']') {
    const size_t clone = s.rfind(" [clone ");
    if (clone == std::string_view::npos) break;
    s = s.substr(0, clone);
  }
  for (std::string_view prefix : kSpecialPrefixes)
    if (s.starts_with(prefix)) return s;
  return name_only(s, true, 0);
}

} // namespace ehelf
