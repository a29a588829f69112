// Escapes that GBNF text and regular expressions share: the letters of control characters
// (\n \r \t \f \v \0) and the hex forms \xHH, \uHHHH and \UHHHHHHHH.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pinfer::grammar {

// The character a control-letter escape stands for; nullopt for any other letter.
inline std::optional<char32_t> ControlEscape(char e) {
  switch (e) {
    case 'n':
      return U'\n';
    case 'r':
      return U'\r';
    case 't':
      return U'\t';
    case 'f':
      return U'\f';
    case 'v':
      return U'\v';
    case '0':
      return U'\0';
    default:
      return std::nullopt;
  }
}

// How many hex digits follow escape letter e: x 2, u 4, U 8; 0 for any other letter.
inline int HexEscapeDigits(char e) { return e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0; }

// The code point written by the first `digits` characters of s; nullopt when they are not
// all hex digits or the value is beyond U+10FFFF.
inline std::optional<char32_t> HexEscapeValue(std::string_view s, int digits) {
  if (s.size() < static_cast<size_t>(digits)) return std::nullopt;
  uint32_t v = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = s[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  if (v > 0x10FFFF) return std::nullopt;
  return static_cast<char32_t>(v);
}

}  // namespace pinfer::grammar
