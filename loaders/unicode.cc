#include "loaders/unicode.h"

#include <algorithm>

#include "loaders/unicode_tables.h"

namespace pinfer {
namespace {

bool InRanges(uint32_t cp, const unicode_internal::CodepointRange* table, size_t n) {
  const auto* end = table + n;
  const auto* it = std::upper_bound(
      table, end, cp,
      [](uint32_t v, const unicode_internal::CodepointRange& r) { return v < r.first; });
  if (it == table) return false;
  --it;
  return cp <= it->last;
}

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

int Utf8SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

bool ValidUtf8At(std::string_view text, size_t pos, size_t* len) {
  if (pos >= text.size()) return false;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const int n = Utf8SequenceLength(s[0]);
  if (n == 0 || static_cast<size_t>(n) > avail) return false;
  for (int i = 1; i < n; ++i) {
    if (!IsContinuation(s[i])) return false;
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  if (n == 3) {
    if (s[0] == 0xE0 && s[1] < 0xA0) return false;
    if (s[0] == 0xED && s[1] >= 0xA0) return false;
  } else if (n == 4) {
    if (s[0] == 0xF0 && s[1] < 0x90) return false;
    if (s[0] == 0xF4 && s[1] >= 0x90) return false;
  }
  *len = static_cast<size_t>(n);
  return true;
}

uint32_t DecodeUtf8(std::string_view text, size_t* pos) {
  size_t len = 0;
  if (!ValidUtf8At(text, *pos, &len)) {
    ++*pos;
    return kReplacementChar;
  }
  const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + *pos;
  *pos += len;
  switch (len) {
    case 1:
      return s[0];
    case 2:
      return ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    case 3:
      return ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    default:
      return ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) |
             (s[3] & 0x3Fu);
  }
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

bool IsUnicodeLetter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return InRanges(cp, unicode_internal::kLetterRanges, unicode_internal::kLetterRangesSize);
}

bool IsUnicodeNumber(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return InRanges(cp, unicode_internal::kNumberRanges, unicode_internal::kNumberRangesSize);
}

bool IsUnicodeWhitespace(uint32_t cp) {
  // The White_Space property (PropList.txt); it has not changed since Unicode 6.3.
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace pinfer
