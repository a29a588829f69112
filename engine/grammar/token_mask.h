// Applying a token mask (grammar_matcher.h's FillMask words: bit id%64 of word id/64 set =
// token id allowed) to logits before sampling.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

namespace pinfer::grammar {

inline bool MaskAllows(std::span<const uint64_t> words, int32_t id) {
  return (words[id >> 6] >> (id & 63)) & 1;
}

// logits[i] = -inf for every token i < n_vocab the mask does not allow. Whole words of
// allowed tokens (the common case inside free text) are skipped.
inline void ApplyTokenMask(std::span<const uint64_t> words, float* logits, int32_t n_vocab) {
  for (int32_t w = 0; w * 64 < n_vocab; ++w) {
    uint64_t off = ~words[w];
    if (w * 64 + 64 > n_vocab) off &= (uint64_t{1} << (n_vocab - w * 64)) - 1;
    while (off) {
      logits[w * 64 + __builtin_ctzll(off)] = -INFINITY;
      off &= off - 1;
    }
  }
}

}  // namespace pinfer::grammar
