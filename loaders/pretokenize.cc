#include "loaders/pretokenize.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/unicode.h"

namespace pinfer {
namespace {

// Character classes of one code point, computed once per character.
enum : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4, kNewline = 8 };

struct Chars {
  std::vector<uint32_t> cp;
  std::vector<uint8_t> cls;
  std::vector<size_t> offset;  // byte offset of each character; offset[n] = text size
  size_t size() const { return cp.size(); }
};

Chars Decode(std::string_view text) {
  Chars c;
  c.cp.reserve(text.size());
  c.cls.reserve(text.size());
  c.offset.reserve(text.size() + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    c.offset.push_back(pos);
    const uint32_t cp = DecodeUtf8(text, &pos);
    uint8_t k = 0;
    if (IsUnicodeLetter(cp)) k |= kLetter;
    if (IsUnicodeNumber(cp)) k |= kNumber;
    if (IsUnicodeWhitespace(cp)) k |= kSpace;
    if (cp == '\r' || cp == '\n') k |= kNewline;
    c.cp.push_back(cp);
    c.cls.push_back(k);
  }
  c.offset.push_back(text.size());
  return c;
}

bool IsOther(uint8_t k) { return (k & (kLetter | kNumber | kSpace)) == 0; }  // [^\s\p{L}\p{N}]

// 's|'t|'re|'ve|'m|'ll|'d at i (optionally case-insensitive): length or 0.
size_t MatchContraction(const Chars& c, size_t i, bool ignore_case) {
  if (c.cp[i] != '\'' || i + 1 >= c.size()) return 0;
  auto lower = [&](size_t j) -> uint32_t {
    const uint32_t v = c.cp[j];
    return (ignore_case && v >= 'A' && v <= 'Z') ? v + 32 : v;
  };
  const uint32_t a = lower(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= c.size()) return 0;
  const uint32_t b = lower(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

size_t RunOf(const Chars& c, size_t i, uint8_t mask) {
  size_t j = i;
  while (j < c.size() && (c.cls[j] & mask)) ++j;
  return j - i;
}

size_t RunOfOther(const Chars& c, size_t i) {
  size_t j = i;
  while (j < c.size() && IsOther(c.cls[j])) ++j;
  return j - i;
}

// \s+(?!\S) then \s+ : the whitespace run at i, leaving its last character to the next
// piece when a non-space follows (and the run is longer than one).
size_t MatchTrailingSpace(const Chars& c, size_t i) {
  const size_t run = RunOf(c, i, kSpace);
  if (run == 0) return 0;
  if (i + run == c.size() || run == 1) return run;
  return run - 1;
}

size_t MatchGpt2(const Chars& c, size_t i) {
  if (size_t n = MatchContraction(c, i, /*ignore_case=*/false)) return n;
  const size_t sp = (c.cp[i] == ' ' && i + 1 < c.size()) ? 1 : 0;
  const uint8_t next = (i + sp < c.size()) ? c.cls[i + sp] : 0;
  for (size_t s = sp + 1; s-- > 0;) {  // with the optional space first, then without
    const uint8_t k = (s == 1) ? next : c.cls[i];
    if (k & kLetter) return s + RunOf(c, i + s, kLetter);
    if (k & kNumber) return s + RunOf(c, i + s, kNumber);
    if (IsOther(k)) return s + RunOfOther(c, i + s);
  }
  return MatchTrailingSpace(c, i);
}

size_t MatchLlama3(const Chars& c, size_t i, size_t max_digits) {
  if (size_t n = MatchContraction(c, i, /*ignore_case=*/true)) return n;
  const uint8_t k = c.cls[i];
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (k & kLetter) return RunOf(c, i, kLetter);
  if (!(k & (kNewline | kNumber)) && i + 1 < c.size() && (c.cls[i + 1] & kLetter)) {
    return 1 + RunOf(c, i + 1, kLetter);
  }
  // \p{N}{1,3} or \p{N}
  if (k & kNumber) {
    size_t n = RunOf(c, i, kNumber);
    return n < max_digits ? n : max_digits;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const size_t sp = (c.cp[i] == ' ' && i + 1 < c.size() && IsOther(c.cls[i + 1])) ? 1 : 0;
  if (sp == 1 || IsOther(k)) {
    size_t j = i + sp + RunOfOther(c, i + sp);
    j += RunOf(c, j, kNewline);
    return j - i;
  }
  // \s*[\r\n]+ : up to and including the last newline of the whitespace run.
  const size_t run = RunOf(c, i, kSpace);
  for (size_t j = i + run; j > i; --j) {
    if (c.cls[j - 1] & kNewline) return j - i;
  }
  return MatchTrailingSpace(c, i);
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizerFromName(std::string_view name) {
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::kLlama3;
  if (name == "qwen2") return PreTokenizer::kQwen2;
  if (name == "gpt2" || name == "default" || name.empty()) return PreTokenizer::kGpt2;
  return absl::UnimplementedError(
      absl::StrCat("unsupported BPE pre-tokenizer \"", Sv(name),
                   "\" (supported: llama-bpe, llama3, qwen2, gpt2, default)"));
}

std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text) {
  std::vector<std::string_view> out;
  if (text.empty()) return out;
  const Chars c = Decode(text);
  size_t i = 0;
  while (i < c.size()) {
    size_t n = 0;
    switch (kind) {
      case PreTokenizer::kGpt2:
        n = MatchGpt2(c, i);
        break;
      case PreTokenizer::kLlama3:
        n = MatchLlama3(c, i, 3);
        break;
      case PreTokenizer::kQwen2:
        n = MatchLlama3(c, i, 1);
        break;
    }
    if (n == 0) n = 1;  // cannot happen with these patterns; guarantees progress
    out.push_back(text.substr(c.offset[i], c.offset[i + n] - c.offset[i]));
    i += n;
  }
  return out;
}

}  // namespace pinfer
