// Benchmark prompts of a wanted length in the server's own tokens, so that two servers given
// the same seed see the same prompts:
//  - token ids, drawn with a seed from a pool: the ids a server's /tokenize gives a seeded
//    text (ordinary tokens only), or every id in [first_id, vocab_size);
//  - text of seeded words, as long as fits the wanted number of tokens when the server
//    tokenizes it (with its special tokens, as a completion prompt is), found with a few
//    /tokenize calls.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer::bench_serve {

// The server's tokenizer: text -> token ids (add_special: BOS and the like, as a prompt).
using TokenizeFn =
    std::function<absl::StatusOr<std::vector<int32_t>>(const std::string& text, bool add_special)>;

// count words drawn with a seed from a built-in list of common English words, spaced.
std::string SeededWords(uint64_t seed, int count);

// Every id in [first_id, vocab_size); InvalidArgument when that is empty.
absl::StatusOr<std::vector<int32_t>> VocabPool(int vocab_size, int first_id = 3);
// The distinct ids of a seeded 2000-word text, without special tokens, ascending.
absl::StatusOr<std::vector<int32_t>> TokenizerPool(const TokenizeFn& tokenize, uint64_t seed);

// Prompt `index` of a seed: len ids drawn from pool (not empty).
std::vector<int32_t> IdsPrompt(const std::vector<int32_t>& pool, uint64_t seed, int index, int len);

struct TextPrompt {
  std::string text;
  int tokens = 0;  // what the server's tokenizer makes of it, special tokens included
};
// The longest run of prompt `index`'s seeded words whose tokens are at most target_len (at
// least one word, even when that is longer). Takes about log2(target_len) tokenizer calls
// at worst, usually 3-5 (the search interpolates).
absl::StatusOr<TextPrompt> FitTextPrompt(const TokenizeFn& tokenize, uint64_t seed, int index,
                                         int target_len);

}  // namespace pinfer::bench_serve
