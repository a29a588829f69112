// UTF-8 helpers for the grammar compiler: decoding, encoding, and splitting a code point
// range into byte-range sequences (each sequence matches the UTF-8 form of a sub-range).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pinfer::grammar {

// Decodes the first code point of s into *cp; returns its length in bytes, 0 when s does not
// start with a well-formed UTF-8 character (overlong forms and surrogates are refused).
size_t DecodeUtf8(std::string_view s, char32_t* cp);

// Appends the UTF-8 form of cp (<= U+10FFFF, not a surrogate) to *out.
void AppendUtf8(char32_t cp, std::string* out);

// Inclusive byte range.
using ByteRange = std::pair<uint8_t, uint8_t>;

// The UTF-8 forms of the scalar values in [lo, hi] (surrogates skipped) as sequences of byte
// ranges: a byte string is the UTF-8 of a value in [lo, hi] iff it matches one sequence.
std::vector<std::vector<ByteRange>> Utf8RangeSequences(char32_t lo, char32_t hi);

}  // namespace pinfer::grammar
