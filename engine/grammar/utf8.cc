#include "engine/grammar/utf8.h"

namespace pinfer::grammar {
namespace {

constexpr char32_t kMaxForLength[] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

int EncodedLength(char32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

void Encode(char32_t cp, uint8_t* b) {
  switch (EncodedLength(cp)) {
    case 1:
      b[0] = static_cast<uint8_t>(cp);
      break;
    case 2:
      b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

// [lo, hi] within one encoded length n: split until every byte position is a plain range
// (the standard construction: a range whose low continuation bits are not all 0 at lo, or
// not all 1 at hi, is cut there). Recursion depth is at most 2 per byte position.
void Split(char32_t lo, char32_t hi, int n, std::vector<std::vector<ByteRange>>* out) {
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Split(lo, lo | m, n, out);
        Split((lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        Split(lo, (hi & ~m) - 1, n, out);
        Split(hi & ~m, hi, n, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, a);
  Encode(hi, b);
  std::vector<ByteRange> seq;
  for (int k = 0; k < n; ++k) seq.push_back({a[k], b[k]});
  out->push_back(std::move(seq));
}

}  // namespace

size_t DecodeUtf8(std::string_view s, char32_t* cp) {
  if (s.empty()) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  int n;
  char32_t v;
  if (p[0] < 0x80) {
    *cp = p[0];
    return 1;
  } else if ((p[0] & 0xE0) == 0xC0) {
    n = 2, v = p[0] & 0x1F;
  } else if ((p[0] & 0xF0) == 0xE0) {
    n = 3, v = p[0] & 0x0F;
  } else if ((p[0] & 0xF8) == 0xF0) {
    n = 4, v = p[0] & 0x07;
  } else {
    return 0;
  }
  if (s.size() < static_cast<size_t>(n)) return 0;
  for (int i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (p[i] & 0x3F);
  }
  if (v <= kMaxForLength[n - 1] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

void AppendUtf8(char32_t cp, std::string* out) {
  uint8_t b[4];
  Encode(cp, b);
  out->append(reinterpret_cast<const char*>(b), EncodedLength(cp));
}

std::vector<std::vector<ByteRange>> Utf8RangeSequences(char32_t lo, char32_t hi) {
  std::vector<std::vector<ByteRange>> out;
  if (hi > 0x10FFFF) hi = 0x10FFFF;
  // Surrogates have no UTF-8 form: take them out first.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) {
      auto a = Utf8RangeSequences(lo, 0xD7FF);
      out.insert(out.end(), a.begin(), a.end());
    }
    if (hi > 0xDFFF) {
      auto b = Utf8RangeSequences(0xE000, hi);
      out.insert(out.end(), b.begin(), b.end());
    }
    return out;
  }
  for (int n = 1; n <= 4 && lo <= hi; ++n) {
    const char32_t top = kMaxForLength[n];
    if (lo > top) continue;
    const char32_t end = hi < top ? hi : top;
    Split(lo, end, n, &out);
    lo = end + 1;
  }
  return out;
}

}  // namespace pinfer::grammar
