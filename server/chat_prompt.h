// Chat prompts to token ids without token injection: special-token text (<|im_end|>, </s>,
// <|eot_id|>, ...) becomes its special token only where it lies wholly inside the template's
// own text; inside a message it stays plain text, so a user cannot forge a turn boundary or
// an end of sequence. The ids equal Tokenizer::Encode(text, true, /*parse_special=*/true) of
// the joined text whenever the messages hold no special-token text.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "loaders/tokenizer.h"
#include "server/chat_template.h"

namespace pinfer::server {

class ChatPromptEncoder {
 public:
  // Indexes the tokenizer's control and user-defined tokens; tok must outlive the encoder.
  explicit ChatPromptEncoder(const Tokenizer& tok);

  // BOS (and EOS) as the tokenizer's spec says, then the pieces' tokens. special_in_content:
  // parse special-token text everywhere, messages included (llama.cpp's behaviour).
  std::vector<int32_t> Encode(const std::vector<PromptPiece>& pieces,
                              bool special_in_content = false) const;

 private:
  // The longest special token spelled at text[pos], if it ends by `end`; -1 when none.
  int32_t SpecialAt(const std::string& text, size_t pos, size_t end) const;

  const Tokenizer& tok_;
  std::array<std::vector<int32_t>, 256> by_first_byte_;  // longest first
};

}  // namespace pinfer::server
