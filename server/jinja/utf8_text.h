// Code point views of UTF-8 strings, for Python's str semantics (len, indexing, slicing).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pinfer::jinja {

// Length in bytes of the UTF-8 sequence starting with lead byte c (1 for stray bytes).
inline size_t Utf8Length(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

// The byte offset where each character of s starts (as SplitCodePoints cuts it), then s.size().
inline std::vector<size_t> CharacterStarts(std::string_view s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    i += std::min(Utf8Length(static_cast<unsigned char>(s[i])), s.size() - i);
  }
  out.push_back(s.size());
  return out;
}

inline std::vector<std::string> SplitCodePoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::min(Utf8Length(static_cast<unsigned char>(s[i])), s.size() - i);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

inline size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace pinfer::jinja
