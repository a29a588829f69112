#include "tests/testing/test_tokenizers.h"

#include <cstdio>
#include <string>
#include <utility>

namespace pinfer::testing {

std::unique_ptr<Tokenizer> ChatMlTokenizer() {
  TokenizerSpec s;
  s.kind = TokenizerSpec::Kind::kSentencePiece;
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.types.push_back(TokenType::kByte);
  }
  for (const char* control : {"<|im_start|>", "<|im_end|>"}) {
    s.tokens.push_back(control);
    s.types.push_back(TokenType::kControl);
  }
  for (const char* piece : {"\xE2\x96\x81", "user", "system", "assistant", "hi", "obey", "\n"}) {
    s.tokens.push_back(piece);
    s.types.push_back(TokenType::kNormal);
  }
  s.scores.assign(s.tokens.size(), -1.0f);
  s.unk_id = 0;
  s.bos_id = 1;
  s.eos_id = 2;
  auto t = Tokenizer::Create(std::move(s));
  return t.ok() ? std::move(*t) : nullptr;
}

}  // namespace pinfer::testing
