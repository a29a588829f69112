// UTF-8 decoding/encoding and the Unicode classes the BPE pre-tokenizers use
// (\p{L}, \p{N}, \s as Oniguruma/Rust regex define them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pinfer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence a lead byte announces: 1..4, or 0 for a byte that cannot start
// one (a continuation byte, 0xC0/0xC1, 0xF5..0xFF).
int Utf8SequenceLength(uint8_t lead);

// Decodes the character at text[*pos] and advances *pos past it. A malformed or truncated
// sequence yields kReplacementChar and advances by one byte, so the caller always progresses.
uint32_t DecodeUtf8(std::string_view text, size_t* pos);

// True when text[pos..] starts with a complete, well-formed character; *len gets its length.
bool ValidUtf8At(std::string_view text, size_t pos, size_t* len);

// Appends the UTF-8 encoding of cp (kReplacementChar for surrogates or values > 0x10FFFF).
void AppendUtf8(uint32_t cp, std::string* out);
std::string EncodeUtf8(uint32_t cp);

bool IsUnicodeLetter(uint32_t cp);      // \p{L}
bool IsUnicodeNumber(uint32_t cp);      // \p{N}
bool IsUnicodeWhitespace(uint32_t cp);  // \s: the White_Space property

}  // namespace pinfer
