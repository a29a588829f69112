// Byte-level BPE pre-tokenizers: hand-written matchers equivalent to the split regexes of
// GPT-2, Llama-3 and Qwen2 (no std::regex). Each splits text into consecutive pieces that
// cover it exactly.
//
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  as llama3 with \p{N} (one digit per piece) instead of \p{N}{1,3}
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer {

enum class PreTokenizer { kGpt2, kLlama3, kQwen2 };

// Maps a GGUF / spec pre-tokenizer name to a matcher: "llama-bpe"/"llama3" -> kLlama3,
// "qwen2" -> kQwen2, "gpt2"/"default"/"" -> kGpt2. Unknown names are an error.
absl::StatusOr<PreTokenizer> PreTokenizerFromName(std::string_view name);

// Splits text (invalid UTF-8 bytes are treated as single non-letter, non-space characters).
std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text);

}  // namespace pinfer
