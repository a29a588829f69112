// Hugging Face tokenizer.json (+ optional tokenizer_config.json) -> TokenizerSpec.
//
// Supported: model.type "BPE" with
//   - a ByteLevel pre-tokenizer (GPT-2, Llama-3, Qwen2 styles; the style is read from the
//     Split regex: \p{N}{1,3} -> llama3, a lone \p{N} -> qwen2, ByteLevel's own regex -> gpt2),
//   - or the Llama-2 layout (byte_fallback, a "▁" Prepend/Replace normaliser or Metaspace),
//     which maps to the SentencePiece kind run with merge ranks instead of scores.
// Merges as "a b" strings or [a, b] pairs; added_tokens (special -> control, others ->
// user-defined); bos/eos/pad/add_bos_token/add_eos_token/chat_template from the config.
// A NFC normaliser is accepted but not applied: input is assumed to be NFC already.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "loaders/tokenizer.h"

namespace pinfer {

// Both arguments are file contents (JSON text), not paths; the config may be "".
absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfFiles(
    const std::string& tokenizer_json, const std::string& tokenizer_config_json_or_empty);

}  // namespace pinfer
