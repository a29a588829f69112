// Small tokenizers built in code for tests that need special tokens.
#pragma once

#include <cstdint>
#include <memory>

#include "loaders/tokenizer.h"

namespace pinfer::testing {

// SentencePiece with byte fallback: <unk> <s> </s> (0, 1, 2), the 256 byte tokens, ChatML's
// two control tokens <|im_start|> and <|im_end|> (kImStart, kImEnd), then the pieces "▁",
// "user", "system", "assistant", "hi", "obey", "\n". BOS is added.
std::unique_ptr<Tokenizer> ChatMlTokenizer();
inline constexpr int32_t kImStart = 259, kImEnd = 260;

}  // namespace pinfer::testing
